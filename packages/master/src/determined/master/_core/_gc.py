"""Checkpoint garbage collection: which checkpoints a ``save_experiment_best``/``save_trial_best``/
``save_trial_latest`` policy drops, and the in-process delete an experiment's deletion uses (GC of
finished experiments and deletes asked for by users run as tasks, see ``_gc_tasks``)."""

from __future__ import annotations

import logging
import math
from typing import Any

from sqlalchemy import select

from determined.master import _wire
from determined.master.db import (
    Checkpoint,
    Database,
    Experiment,
    ModelVersion,
    Run,
    validation_at_step,
)

logger = logging.getLogger("determined.master")


def _metric_of(session: Any, ckpt: Checkpoint, metric: str | None) -> float | None:
    if not metric or ckpt.trial_id is None:
        return None
    row = validation_at_step(session, ckpt.trial_id, ckpt.steps_completed)
    if row is None:
        return None
    value = _wire.to_float((row.metrics.get("avg_metrics") or {}).get(metric))
    return None if value is None or math.isnan(value) else value


def checkpoints_to_delete(session: Any, exp: Experiment) -> list[Checkpoint]:
    """The completed checkpoints of ``exp`` that its policy does not keep."""
    storage = exp.config.get("checkpoint_storage") or {}
    searcher = exp.config.get("searcher") or {}
    metric = searcher.get("metric")
    smaller = bool(searcher.get("smaller_is_better", True))
    exp_best = int(storage.get("save_experiment_best") or 0)
    trial_best = int(storage.get("save_trial_best") or 0)
    trial_latest = int(storage.get("save_trial_latest") or 0)
    ckpts = list(
        session.scalars(
            select(Checkpoint).where(
                Checkpoint.experiment_id == exp.id, Checkpoint.state == "COMPLETED"
            )
        )
    )
    values = {c.uuid: _metric_of(session, c, metric) for c in ckpts}

    def best_order(items: list[Checkpoint]) -> list[Checkpoint]:
        scored = [(v, c) for c in items if (v := values[c.uuid]) is not None]
        scored.sort(key=lambda pair: pair[0] if smaller else -pair[0])
        return [c for _, c in scored]

    keep: set[str] = set()
    keep.update(c.uuid for c in best_order(ckpts)[:exp_best])
    by_trial: dict[int | None, list[Checkpoint]] = {}
    for c in ckpts:
        by_trial.setdefault(c.trial_id, []).append(c)
    for items in by_trial.values():
        keep.update(c.uuid for c in best_order(items)[:trial_best])
        latest = sorted(items, key=lambda c: (c.steps_completed, c.report_time, c.id), reverse=True)
        keep.update(c.uuid for c in latest[:trial_latest])
    return [c for c in ckpts if c.uuid not in keep]


def delete_checkpoints(db: Database, uuids: list[str]) -> None:
    """Delete checkpoints from their storage and mark them DELETED (PARTIALLY_DELETED when files
    remain). Checkpoints registered as model versions are never deleted."""
    from determined.core import plugins

    uuids = unregistered(db, uuids)
    for uuid in uuids:
        with db.read() as session:
            ckpt = session.scalar(select(Checkpoint).where(Checkpoint.uuid == uuid))
            storage_config = _storage_config_of(session, ckpt) if ckpt else None
        if ckpt is None or storage_config is None:
            continue
        remaining: dict[str, Any] = {}
        try:
            manager = plugins.checkpoint_storage(storage_config)
            remaining = manager.delete(uuid, ["**/*"]) or {}
        except Exception:
            logger.exception("master: deleting checkpoint %s from storage failed", uuid)
            continue
        with db.write() as session:
            row = session.scalar(select(Checkpoint).where(Checkpoint.uuid == uuid))
            if row is not None:
                row.state = "PARTIALLY_DELETED" if remaining else "DELETED"
                row.resources = {k: str(v) for k, v in remaining.items()}
                row.size = sum(int(v) for v in remaining.values())


def unregistered(db: Database, uuids: list[str]) -> list[str]:
    """``uuids`` minus the checkpoints the model registry holds (they outlive every GC policy)."""
    if not uuids:
        return []
    with db.read() as session:
        kept = set(
            session.scalars(
                select(ModelVersion.checkpoint_uuid).where(ModelVersion.checkpoint_uuid.in_(uuids))
            )
        )
    if kept:
        logger.info("master: keeping checkpoints registered as model versions: %s", sorted(kept))
    return [u for u in uuids if u not in kept]


def _storage_config_of(session: Any, ckpt: Checkpoint) -> dict[str, Any] | None:
    exp_id = ckpt.experiment_id
    if exp_id is None and ckpt.trial_id is not None:
        run = session.get(Run, ckpt.trial_id)
        exp_id = run.experiment_id if run else None
    exp = session.get(Experiment, exp_id) if exp_id is not None else None
    if exp is None:
        return None
    return dict(exp.config.get("checkpoint_storage") or {})
