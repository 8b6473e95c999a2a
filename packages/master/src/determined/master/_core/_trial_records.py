"""The trial-records service: what a running trial records about itself outside the lifecycle.

Status text, an early-exit reason (the searcher hears it at exit), user metadata, the checkpoint
storage a run uses, alerts, readiness of its allocation and shipped log lines. Each write is its own
short transaction: none of them changes a trial's or an experiment's state.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from determined.master._core._log_policies import monitor as monitor_log_policies
from determined.master._core._task_logs import master_log
from determined.master._wire import APIError
from determined.master.db import Allocation, Database, Experiment, Run, StorageBackend, TaskLog


def _run(session: Session, trial_id: int) -> Run:
    run = session.get(Run, trial_id)
    if run is None:
        raise APIError(404, f"trial {trial_id} not found")
    return run


class TrialRecords:
    """Writes of running trials that no state machine looks at."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def set_runner_state(self, trial_id: int, state: str) -> None:
        """The trial's status text (``runner/metadata``), cut to 255 characters."""
        with self._db.write() as session:
            _run(session, trial_id).runner_state = state[:255]

    def record_early_exit(self, trial_id: int, reason: str) -> None:
        """Why user code ends the trial early; recorded once, heard by the searcher at exit."""
        with self._db.write() as session:
            run = _run(session, trial_id)
            if run.early_exit_reason:
                raise APIError(400, f"trial {trial_id} already reported an early exit")
            run.early_exit_reason = reason

    def merge_metadata(self, trial_id: int, metadata: dict[str, Any]) -> dict[str, Any]:
        """Deep-merge user metadata into the run's; returns the result."""
        with self._db.write() as session:
            run = _run(session, trial_id)
            merged = deep_merge(dict(run.metadata_ or {}), metadata)
            run.metadata_ = merged
            return merged

    def register_storage(self, trial_id: int, storage: dict[str, Any] | None) -> int:
        """Record the checkpoint storage a run uses (its experiment's when ``storage`` is empty);
        returns the ``storageId``."""
        with self._db.write() as session:
            run = _run(session, trial_id)
            exp = session.get(Experiment, run.experiment_id)
            if exp is None:
                raise APIError(404, f"experiment of trial {trial_id} not found")
            if not storage:
                storage = dict(exp.config.get("checkpoint_storage") or {})
            row = StorageBackend(config=storage)
            session.add(row)
            session.flush()
            return int(row.id)

    def alert(self, trial_id: int, text: str, level: str) -> None:
        """``core.alert()``: with no webhooks configured, the alert goes to the trial's logs."""
        with self._db.write() as session:
            master_log(session, _run(session, trial_id).task_id, text, level)

    def mark_ready(self, allocation_id: str) -> None:
        """The allocation's task is up."""
        with self._db.write() as session:
            row = session.get(Allocation, allocation_id)
            if row is None:
                raise APIError(404, f"allocation {allocation_id} not found")
            row.is_ready = True

    def add_logs(self, rows: list[TaskLog]) -> None:
        """Store log lines a task shipped itself (matched against its log policies)."""
        with self._db.write() as session:
            session.add_all(rows)
            monitor_log_policies(session, rows)


def deep_merge(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``update`` merged in, nested objects merged key by key."""
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            base[key] = deep_merge(dict(base[key]), value)
        else:
            base[key] = value
    return base
