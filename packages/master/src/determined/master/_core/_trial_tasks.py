"""A trial's tasks: one per start of the trial, as upstream names them.

A trial's first task is ``<experiment id>.<request id>``; each ``continue`` of the experiment gives
the trial a new task ``<first task id>-N`` (N: how many tasks it had), so its start and end times
are the continued run's, while logs, ``taskIds`` and deletes cover every task of the trial.
:attr:`Run.task_id` is always the current (newest) one.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session

from determined.master.db import Experiment, Run, Task, core_rows, utcnow


def trial_task_ids(session: Session, trial_id: int) -> list[str]:
    """The task ids of a trial, oldest first (upstream's ``taskIds``)."""
    rows = session.execute(
        select(Task.task_id, Task.start_time)
        .where(Task.trial_id == trial_id)
        .order_by(Task.start_time, Task.task_id)
    ).all()
    return [task_id for task_id, _ in rows]


_TRIALS_TASK_IDS = (
    select(Task.__table__.c.trial_id, Task.__table__.c.task_id)
    .where(Task.__table__.c.trial_id.in_(bindparam("ids", expanding=True)))
    .order_by(Task.__table__.c.start_time, Task.__table__.c.task_id)
)
"""Built once: :func:`trials_task_ids` is on every trial read (see ``_api/_serialize.trials``)."""


def trials_task_ids(session: Session, trial_ids: Sequence[int]) -> dict[int, list[str]]:
    """:func:`trial_task_ids` of many trials in one query (trials without tasks are left out)."""
    out: dict[int, list[str]] = {}
    for trial_id, task_id in core_rows(session, _TRIALS_TASK_IDS, {"ids": list(trial_ids)}):
        if trial_id is not None:  # the IN filter leaves none; the column is nullable
            out.setdefault(trial_id, []).append(task_id)
    return out


def start_new_task(session: Session, exp: Experiment, run: Run) -> str:
    """Give a trial that runs again (``continue``) a task of its own; returns its id."""
    earlier = trial_task_ids(session, run.id)
    first = earlier[0] if earlier else run.task_id
    count = max(len(earlier), 1)
    while session.get(Task, f"{first}-{count}") is not None:
        count += 1
    task_id = f"{first}-{count}"
    session.add(
        Task(
            task_id=task_id,
            task_type="TRIAL",
            job_id=exp.job_id,
            trial_id=run.id,
            start_time=utcnow(),
        )
    )
    run.task_id = task_id
    return task_id
