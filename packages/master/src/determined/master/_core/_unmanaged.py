"""The unmanaged-runs service: experiments and trials that ``core_v2`` runs outside the master.

An unmanaged experiment is created (or found again by its external id) by the training script
itself; the master never schedules it, runs no searcher for it and launches no process. Its trials
say what state they are in (``PATCH /api/v1/trials/{id}``) and start each run themselves
(``POST /api/v1/trials/{id}/start``), which answers the checkpoint to resume from. The experiment's
state follows its trials': RUNNING while any runs, else COMPLETED, ERROR or PAUSED (upstream's
order). Metrics and checkpoints go through the ordinary report routes. A RUNNING trial that sends
no heartbeat for five minutes (its process died without ``close()``) is marked ERROR, as upstream.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import threading
import uuid
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from determined.master._core._experiments import get_experiment, get_trial
from determined.master._core._lifecycle import Lifecycle
from determined.master._core._task_logs import master_log
from determined.master._core._transactions import Transactions
from determined.master._wire import TERMINAL_STATES, APIError, as_utc
from determined.master.db import (
    Experiment,
    Run,
    Task,
    User,
    latest_completed_checkpoint,
    utcnow,
)

TRIAL_STATES = (
    "ACTIVE",
    "PAUSED",
    "STOPPING_CANCELED",
    "STOPPING_KILLED",
    "STOPPING_COMPLETED",
    "STOPPING_ERROR",
    "CANCELED",
    "COMPLETED",
    "ERROR",
    "QUEUED",
    "PULLING",
    "STARTING",
    "RUNNING",
)
"""The trial states a client may set (upstream's ``trialv1.State`` without ``UNSPECIFIED``)."""

_EXPERIMENT_STATE_RANK = {"PAUSED": 10, "ERROR": 20, "COMPLETED": 30, "RUNNING": 40}
"""An unmanaged experiment takes the highest-ranked state among its trials (upstream's rule)."""

LOST_AFTER_SECONDS = 300.0
"""A RUNNING unmanaged trial with no heartbeat for this long is marked ERROR (upstream's 5 min)."""
WATCHDOG_SECONDS = 60.0
"""How often the master looks for lost unmanaged trials."""

logger = logging.getLogger("determined.master")


@dataclasses.dataclass(frozen=True)
class StartedRun:
    """What ``POST /api/v1/trials/{id}/start`` answers: the new run and where it resumes."""

    trial_run_id: int
    latest_checkpoint: str | None
    steps_completed: int


class UnmanagedRuns:
    """Create, find, start and update unmanaged experiments and trials; one transaction each."""

    def __init__(self, transactions: Transactions, lifecycle: Lifecycle) -> None:
        self._transactions = transactions
        self._lifecycle = lifecycle
        self._watchdog_stop = threading.Event()
        self._watchdog: threading.Thread | None = None

    def put_experiment(
        self,
        *,
        owner_id: int,
        config: dict[str, Any],
        original: str,
        project_id: int,
        external_id: str | None,
    ) -> int:
        """Create an unmanaged experiment; with ``external_id``, the experiment that already has
        it is returned instead (its config replaced by ``config``, as upstream's upsert does)."""
        with self._transactions.txn() as session:
            if session.get(User, owner_id) is None:
                raise APIError(401, "the calling user no longer exists")
            if external_id is not None:
                existing = session.scalar(
                    select(Experiment).where(Experiment.external_experiment_id == external_id)
                )
                if existing is not None:
                    if existing.state == "DELETED":
                        raise APIError(
                            409, f"the experiment with external id {external_id!r} was deleted"
                        )
                    if not existing.unmanaged:
                        raise APIError(400, f"experiment {existing.id} is not unmanaged")
                    existing.config = config
                    existing.original_config = original
                    existing.labels = list(config.get("labels") or [])
                    return existing.id
            resources = config.get("resources") or {}
            priority = resources.get("priority")
            exp = Experiment(
                state="PAUSED",
                config=config,
                original_config=original,
                model_definition=None,
                owner_id=owner_id,
                parent_id=None,
                project_id=project_id or 1,
                labels=list(config.get("labels") or []),
                notes="",
                priority=int(priority) if priority is not None else 42,
                weight=float(resources.get("weight") or 1.0),
                max_slots=resources.get("max_slots"),
                progress=0.0,
                unmanaged=True,
                external_experiment_id=external_id,
            )
            session.add(exp)
            session.flush()
            return exp.id

    def create_trial(self, exp_id: int, hparams: dict[str, Any], external_id: str | None) -> int:
        """Add a PAUSED trial to an unmanaged experiment; with ``external_id``, the experiment's
        trial that already has it is returned instead (with ``hparams`` replaced)."""
        with self._transactions.txn() as session:
            exp = get_experiment(session, exp_id)
            if not exp.unmanaged:
                raise APIError(400, "trials can only be created on unmanaged experiments")
            if external_id is not None:
                existing = session.scalar(
                    select(Run).where(
                        Run.experiment_id == exp.id, Run.external_trial_id == external_id
                    )
                )
                if existing is not None:
                    existing.hparams = hparams
                    return existing.id
            suffix = external_id if external_id is not None else uuid.uuid4().hex
            run = Run(
                experiment_id=exp.id,
                request_id=uuid.uuid4().hex,
                task_id=f"{exp.id}.{suffix}",
                state="PAUSED",
                hparams=hparams,
                seed=0,
                summary_metrics={},
                metadata_={},
                external_trial_id=external_id,
            )
            session.add(run)
            session.flush()
            if session.get(Task, run.task_id) is None:
                session.add(
                    Task(task_id=run.task_id, task_type="TRIAL", job_id="", trial_id=run.id)
                )
            _update_experiment_state(session, exp)
            return run.id

    def start_trial(self, trial_id: int, resume: bool) -> StartedRun:
        """Begin a new run of an unmanaged trial; a run after the first resumes from the trial's
        latest completed checkpoint. Without ``resume``, only a trial never started may start."""
        with self._transactions.txn() as session:
            run, exp = _unmanaged_trial(session, trial_id)
            if not resume and run.run_id != 0:
                raise APIError(400, f"trial {trial_id} has already been started")
            run.run_id += 1
            run.end_time = None
            run.last_activity = utcnow()
            self._lifecycle.set_trial_state(session, run, "RUNNING")
            _update_experiment_state(session, exp)
            checkpoint = latest_completed_checkpoint(session, run.id) if run.run_id > 1 else None
            return StartedRun(
                trial_run_id=run.run_id,
                latest_checkpoint=checkpoint.uuid if checkpoint is not None else None,
                steps_completed=int(checkpoint.steps_completed) if checkpoint is not None else 0,
            )

    def patch_trial(self, trial_id: int, state: str | None) -> None:
        """A heartbeat of an unmanaged trial, with its new state when ``state`` is given."""
        with self._transactions.txn() as session:
            run, exp = _unmanaged_trial(session, trial_id)
            run.last_activity = utcnow()
            if state is not None:
                if state not in TRIAL_STATES:
                    raise APIError(400, f"state: unknown trial state {state!r}")
                if state not in TERMINAL_STATES:
                    run.end_time = None
                self._lifecycle.set_trial_state(session, run, state)
                _update_experiment_state(session, exp)

    def mark_lost_trials(self, lost_after: float = LOST_AFTER_SECONDS) -> list[int]:
        """Mark ERROR every RUNNING unmanaged trial silent for ``lost_after`` seconds (its end
        time is its last heartbeat); returns their ids."""
        cutoff = utcnow() - datetime.timedelta(seconds=lost_after)
        with self._transactions.txn() as session:
            rows = session.execute(
                select(Run, Experiment)
                .join(Experiment, Run.experiment_id == Experiment.id)
                .where(Experiment.unmanaged.is_(True), Run.state == "RUNNING")
            ).all()
            lost: list[int] = []
            experiments: dict[int, Experiment] = {}
            for run, exp in rows:
                last = as_utc(run.last_activity)
                if last is not None and last >= cutoff:
                    continue
                master_log(
                    session,
                    run.task_id,
                    f"no heartbeat from unmanaged trial {run.id} for {lost_after:.0f} s: "
                    "its process is gone",
                    "LOG_LEVEL_ERROR",
                )
                self._lifecycle.set_trial_state(session, run, "ERROR")
                run.end_time = last or utcnow()
                lost.append(run.id)
                experiments[exp.id] = exp
            for exp in experiments.values():
                _update_experiment_state(session, exp)
        if lost:
            logger.info("master: marked lost unmanaged trials ERROR: %s", lost)
        return lost

    def start_watchdog(self, interval: float = WATCHDOG_SECONDS) -> None:
        """Look for lost unmanaged trials every ``interval`` seconds, on a daemon thread."""
        if self._watchdog is not None:
            return
        self._watchdog_stop.clear()

        def watch() -> None:
            while not self._watchdog_stop.wait(interval):
                try:
                    self.mark_lost_trials()
                except Exception:
                    logger.exception("master: looking for lost unmanaged trials failed")

        self._watchdog = threading.Thread(target=watch, name="det-unmanaged-watchdog", daemon=True)
        self._watchdog.start()

    def stop_watchdog(self) -> None:
        """Stop the lost-trial watchdog."""
        self._watchdog_stop.set()
        if self._watchdog is not None:
            self._watchdog.join(timeout=5)
            self._watchdog = None


def _unmanaged_trial(session: Session, trial_id: int) -> tuple[Run, Experiment]:
    run, exp = get_trial(session, trial_id)
    if not exp.unmanaged:
        raise APIError(400, "only unmanaged trials are supported")
    return run, exp


def _update_experiment_state(session: Session, exp: Experiment) -> None:
    """Give ``exp`` the most advanced state of its trials (PAUSED < ERROR < COMPLETED < RUNNING)."""
    session.flush()
    runs = list(session.scalars(select(Run).where(Run.experiment_id == exp.id)))
    if not runs:
        return
    state = "PAUSED"
    for run in runs:
        if _EXPERIMENT_STATE_RANK.get(run.state, 0) > _EXPERIMENT_STATE_RANK[state]:
            state = run.state
    if state == exp.state:
        return
    exp.state = state
    if state in TERMINAL_STATES:
        ends = [as_utc(r.end_time) for r in runs if r.end_time is not None]
        exp.end_time = max(e for e in ends if e is not None) if ends else utcnow()
        if state == "COMPLETED":
            exp.progress = 1.0
    else:
        exp.end_time = None
