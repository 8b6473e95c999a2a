"""Queries that more than one part of the master asks (API serializers, checkpoint GC, web UI, core).

One definition each, so the answer cannot differ between the REST API, the UI and garbage collection.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from sqlalchemy import Executable, Result, Select, bindparam, select
from sqlalchemy.orm import Session

from determined.master.db._models import Checkpoint, Metric, Model, ModelVersion

if TYPE_CHECKING:
    from typing_extensions import Unpack


def core_rows(
    session: Session, statement: Executable, params: dict[str, Any]
) -> Result[Unpack[tuple[Any, ...]]]:
    """Run a prebuilt Core statement (table columns, not ORM entities) in ``session``'s transaction.

    Core statements skip the ORM's per-call work (statement building, cache keys, entity loading),
    most of the CPU of a read route; they also skip autoflush, so pending changes are flushed here
    first, as an ORM query would (a no-op when the session holds none)."""
    session.flush()
    return session.connection().execute(statement, params)


def validation_at_step(
    session: Session, trial_id: int | None, steps_completed: int
) -> Metric | None:
    """The trial's newest live (not archived) validation report at ``steps_completed``: the
    validation that goes with a checkpoint taken at that step. ``None`` when there is none."""
    if trial_id is None:
        return None
    return session.scalar(
        select(Metric)
        .where(
            Metric.trial_id == trial_id,
            Metric.group == "validation",
            Metric.total_batches == steps_completed,
            Metric.archived.is_(False),
        )
        .order_by(Metric.id.desc())
        .limit(1)
    )


def checkpoint_validation_metrics(session: Session, ckpt: Checkpoint) -> dict[str, Any]:
    """The ``avg_metrics`` of the validation reported at ``ckpt``'s step (empty when none)."""
    row = validation_at_step(session, ckpt.trial_id, ckpt.steps_completed)
    return dict((row.metrics or {}).get("avg_metrics") or {}) if row is not None else {}


def latest_completed_checkpoint(
    session: Session, trial_id: int, max_steps: int | None = None
) -> Checkpoint | None:
    """The trial's most recently reported COMPLETED checkpoint (what a restart resumes from);
    with ``max_steps``, the latest one of at most that many ``steps_completed``."""
    query = _LATEST_COMPLETED  # built once: trials' creation and exit ask it
    if max_steps is not None:
        query = query.where(Checkpoint.steps_completed <= max_steps)
    return session.scalar(query, {"trial_id": trial_id})


def latest_completed_query(trial_id: Any, *columns: Any) -> Select[Any]:
    """The SELECT of :func:`latest_completed_checkpoint` for the trial ``trial_id`` (a bound
    parameter, or a column to correlate the query as a subquery): ``columns`` of the checkpoint,
    or the whole row."""
    return (
        select(*(columns or (Checkpoint,)))
        .where(Checkpoint.trial_id == trial_id, Checkpoint.state == "COMPLETED")
        .order_by(Checkpoint.report_time.desc(), Checkpoint.id.desc())
        .limit(1)
    )


_LATEST_COMPLETED: Select[Checkpoint] = latest_completed_query(bindparam("trial_id"))


def registered_versions(session: Session, uuids: Iterable[str]) -> dict[str, list[str]]:
    """Which of ``uuids`` are registered as model versions: uuid -> ["'model' version N", ...].
    Such checkpoints outlive every delete and GC policy."""
    wanted = list(dict.fromkeys(uuids))
    if not wanted:
        return {}
    rows = session.execute(
        select(ModelVersion.checkpoint_uuid, Model.name, ModelVersion.version)
        .join(Model, Model.id == ModelVersion.model_id)
        .where(ModelVersion.checkpoint_uuid.in_(wanted))
        .order_by(Model.name, ModelVersion.version)
    ).all()
    out: dict[str, list[str]] = {}
    for uuid, name, version in rows:
        out.setdefault(uuid, []).append(f"{name!r} version {version}")
    return out
