"""Checkpoint garbage collection as tasks: each run is a ``CHECKPOINT_GC`` task of its own.

As upstream, a GC run is a task named ``Checkpoint GC (Experiment N)``, placed by the resource
manager (0 slots, the default pool) and shown in ``GET /tasks`` and ``GET /api/v1/tasks`` while it
runs, then TERMINATED. Its process (``python -m determined.exec.gc_checkpoints``, run as the
experiment's owner in the experiment's environment) deletes the files and reports what remains
through ``PATCH /api/v1/checkpoints``, so it works wherever the resource manager places it.

Three things start one (one task per experiment): an experiment reaching a terminal state (its
``save_*`` policy, files deleted whole), ``DELETE /api/v1/checkpoints`` (the checkpoints read
``DELETED`` at once, as upstream) and ``POST /api/v1/checkpoints/rm`` (files matching globs; no globs
refreshes the recorded file list).
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from typing import Any

from sqlalchemy import select

from determined.master._core._gc import checkpoints_to_delete, unregistered
from determined.master._core._tasks import Tasks, TaskSpec, TaskView
from determined.master.db import Checkpoint, Database, Experiment, Project, Run

logger = logging.getLogger("determined.master")

KIND = "CHECKPOINT_GC"
"""The task kind (upstream's ``TASK_TYPE_CHECKPOINT_GC``)."""

FULL_DELETE = ["**/*"]
"""The globs that delete a whole checkpoint."""


def task_name(experiment_id: int) -> str:
    """The name a GC task of ``experiment_id`` is listed under (upstream's)."""
    return f"Checkpoint GC (Experiment {experiment_id})"


class CheckpointGC:
    """Starts checkpoint GC tasks (one instance per master)."""

    def __init__(self, db: Database, tasks: Tasks) -> None:
        self._db = db
        self._tasks = tasks

    def collect_experiment(self, experiment_id: int) -> TaskView | None:
        """Delete what the finished experiment's ``save_*`` policy does not keep (a task, or
        None when nothing is to be deleted). Errors are logged: GC never fails its caller."""
        try:
            with self._db.read() as session:
                exp = session.get(Experiment, experiment_id)
                doomed = [c.uuid for c in checkpoints_to_delete(session, exp)] if exp else []
            doomed = unregistered(self._db, doomed)
            if not doomed:
                return None
            return self._start(experiment_id, doomed, FULL_DELETE)
        except Exception:
            logger.exception("master: checkpoint GC of experiment %s failed", experiment_id)
            return None

    def delete(self, uuids: list[str]) -> list[TaskView]:
        """Mark checkpoints ``DELETED`` now and start the tasks that delete their files."""
        uuids = unregistered(self._db, uuids)
        with self._db.write() as session:
            for row in session.scalars(select(Checkpoint).where(Checkpoint.uuid.in_(uuids))):
                row.state = "DELETED"
                row.size = 0
        return self.remove_files(uuids, FULL_DELETE)

    def remove_files(self, uuids: list[str], globs: list[str]) -> list[TaskView]:
        """Start the tasks that delete the files of checkpoints matching ``globs`` (``[]``: only
        list them) and report what remains."""
        views = []
        for experiment_id, group in self._by_experiment(uuids).items():
            views.append(self._start(experiment_id, group, globs))
        return views

    def _by_experiment(self, uuids: list[str]) -> dict[int, list[str]]:
        groups: dict[int, list[str]] = defaultdict(list)
        with self._db.read() as session:
            rows = session.execute(
                select(Checkpoint.uuid, Checkpoint.experiment_id, Run.experiment_id)
                .join(Run, Run.id == Checkpoint.trial_id, isouter=True)
                .where(Checkpoint.uuid.in_(uuids))
            ).all()
        for uuid, exp_id, run_exp_id in rows:
            owner = exp_id if exp_id is not None else run_exp_id
            if owner is not None:
                groups[int(owner)].append(uuid)
        return dict(groups)

    def _start(self, experiment_id: int, uuids: list[str], globs: list[str]) -> TaskView:
        with self._db.read() as session:
            exp = session.get(Experiment, experiment_id)
            if exp is None:
                raise ValueError(f"experiment {experiment_id} not found")
            project = session.get(Project, exp.project_id)
            owner_id, config = exp.owner_id, dict(exp.config or {})
            workspace_id = project.workspace_id if project is not None else 1
        spec: dict[str, Any] = {
            "checkpoint_storage": dict(config.get("checkpoint_storage") or {}),
            "uuids": list(uuids),
            "globs": list(globs),
        }
        view = self._tasks.start(
            TaskSpec(
                kind=KIND,
                owner_id=owner_id,
                argv=["python3", "-m", "determined.exec.gc_checkpoints"],
                config={"environment": dict(config.get("environment") or {})},
                description=task_name(experiment_id),
                env={"DET_GC_SPEC": json.dumps(spec)},
                slots=0,
                resource_pool="default",
                workspace_id=workspace_id,
            )
        )
        logger.info(
            "master: checkpoint GC task %s for experiment %s: %d checkpoint(s), globs %s",
            view.task_id,
            experiment_id,
            len(uuids),
            globs,
        )
        return view
