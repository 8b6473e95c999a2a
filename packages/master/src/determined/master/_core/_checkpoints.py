"""The checkpoints service: checkpoints trials report, and what remains of them after deletes."""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from determined.master._wire import APIError
from determined.master.db import Allocation, Checkpoint, Database, Run


@dataclasses.dataclass(frozen=True)
class CheckpointReport:
    """A checkpoint a trial finished uploading, as ``POST /api/v1/checkpoints`` describes it."""

    uuid: str
    task_id: str
    allocation_id: str | None
    report_time: datetime.datetime
    state: str
    resources: dict[str, int]
    metadata: dict[str, Any]
    storage_id: int | None
    steps_completed: int


def get_checkpoint(session: Session, uuid: str) -> Checkpoint:
    """A checkpoint by uuid, or a 404."""
    ckpt = session.scalar(select(Checkpoint).where(Checkpoint.uuid == uuid))
    if ckpt is None:
        raise APIError(404, f"checkpoint {uuid} not found")
    return ckpt


class Checkpoints:
    """Writes of checkpoint rows (storage deletes go through ``_gc``)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def report(self, report: CheckpointReport, caller_allocation_id: str | None) -> None:
        """Record a checkpoint; the trial is found by task id, else by the caller's allocation.
        A retried report (clients retry it as idempotent) updates the same row."""
        with self._db.write() as session:
            task_id = report.task_id
            run = session.scalar(select(Run).where(Run.task_id == task_id)) if task_id else None
            if run is None and caller_allocation_id:
                alloc = session.get(Allocation, caller_allocation_id)
                run = session.get(Run, alloc.trial_id) if alloc and alloc.trial_id else None
            values = {
                "task_id": task_id or (run.task_id if run else ""),
                "allocation_id": report.allocation_id,
                "report_time": report.report_time,
                "state": report.state,
                "resources": report.resources,
                "metadata_": report.metadata,
                "size": sum(report.resources.values()),
                "trial_id": run.id if run else None,
                "experiment_id": run.experiment_id if run else None,
                "storage_id": report.storage_id,
                "steps_completed": report.steps_completed,
            }
            existing = session.scalar(select(Checkpoint).where(Checkpoint.uuid == report.uuid))
            if existing is None:
                session.add(Checkpoint(uuid=report.uuid, **values))
            else:
                for key, value in values.items():
                    setattr(existing, key, value)

    def record_remaining(self, remaining: list[tuple[str, dict[str, int]]]) -> None:
        """After deletes (by a GC task or the client): the files left of each checkpoint.

        Upstream's ``PatchCheckpoints``: nothing left is ``DELETED`` (the file list is kept, the
        size no longer counts); files left replace the list, and the state becomes
        ``PARTIALLY_DELETED`` only when the list changed (a refresh of an intact one leaves it).
        """
        with self._db.write() as session:
            for uuid, files in remaining:
                ckpt = get_checkpoint(session, uuid)
                if not files:
                    ckpt.state = "DELETED"
                    ckpt.size = 0
                    continue
                before = {k: int(v) for k, v in (ckpt.resources or {}).items()}
                if "metadata.json" in files:  # older reports left it out (as upstream allows)
                    before.setdefault("metadata.json", files["metadata.json"])
                if before != files:
                    ckpt.state = "PARTIALLY_DELETED"
                ckpt.resources = files
                ckpt.size = sum(files.values())

    def set_metadata(self, uuid: str, metadata: dict[str, Any]) -> None:
        """Replace a checkpoint's user metadata."""
        with self._db.write() as session:
            get_checkpoint(session, uuid).metadata_ = metadata
