"""Trial source infos: which trials used a checkpoint or a model version, and their metrics.

A batch-inference or fine-tuning task reports the checkpoint it started from
(``core_context.experimental.report_task_using_checkpoint`` / ``..._model_version``); the SDK's
``Checkpoint.get_metrics()`` and ``ModelVersion.iter_metrics()`` then read the metrics those trials
reported. Unlike upstream, which returned at most 1000 reports per trial, every report is returned.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from determined.master._core._checkpoints import get_checkpoint
from determined.master._core._model_registry import find_version
from determined.master._wire import APIError
from determined.master.db import Database, Metric, Run, TrialSourceInfo

SOURCE_TYPES = (
    "TRIAL_SOURCE_INFO_TYPE_UNSPECIFIED",
    "TRIAL_SOURCE_INFO_TYPE_INFERENCE",
    "TRIAL_SOURCE_INFO_TYPE_FINE_TUNING",
)
"""The values of upstream's ``TrialSourceInfoType`` enum."""


def source_type(value: Any) -> str:
    """The enum name of a source type given by name (with or without the prefix) or number;
    UNSPECIFIED when absent, as protobuf reads a missing enum."""
    if value is None or value == "":
        return SOURCE_TYPES[0]
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < len(SOURCE_TYPES):
        return SOURCE_TYPES[value]
    text = str(value or "").strip().upper()
    if text and not text.startswith("TRIAL_SOURCE_INFO_TYPE_"):
        text = f"TRIAL_SOURCE_INFO_TYPE_{text}"
    if text not in SOURCE_TYPES:
        raise APIError(400, f"trialSourceInfoType: must be one of {', '.join(SOURCE_TYPES)}")
    return text


@dataclasses.dataclass(frozen=True)
class SourceInfo:
    """A trial that used a checkpoint (and, when known, the model version it came from)."""

    trial_id: int
    checkpoint_uuid: str
    source_type: str
    model_id: int | None = None
    model_version: int | None = None


@dataclasses.dataclass(frozen=True)
class MetricRow:
    """One stored metrics report, as the metrics routes serialize it."""

    id: int
    trial_id: int
    trial_run_id: int
    total_batches: int
    end_time: Any
    metrics: dict[str, Any]
    group: str
    archived: bool


class TrialSources:
    """Records trial source infos and reads the metrics of the trials behind them."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def record(self, info: SourceInfo) -> SourceInfo:
        """Store (or update) the link of a trial to a checkpoint; 404 for an unknown trial or
        checkpoint."""
        with self._db.write() as session:
            if session.get(Run, info.trial_id) is None:
                raise APIError(404, f"trial {info.trial_id} not found")
            get_checkpoint(session, info.checkpoint_uuid)
            row = session.get(TrialSourceInfo, (info.trial_id, info.checkpoint_uuid))
            if row is None:
                row = TrialSourceInfo(trial_id=info.trial_id, checkpoint_uuid=info.checkpoint_uuid)
                session.add(row)
            row.trial_source_info_type = info.source_type
            if info.model_id is not None:
                row.model_id = info.model_id
            if info.model_version is not None:
                row.model_version = info.model_version
        return info

    def checkpoint_metrics(
        self, uuid: str, source: str | None, group: str | None
    ) -> list[MetricRow]:
        """The reports of the trials that used checkpoint ``uuid`` (404 for an unknown one)."""
        with self._db.read() as session:
            get_checkpoint(session, uuid)
            query = select(TrialSourceInfo.trial_id).where(TrialSourceInfo.checkpoint_uuid == uuid)
            return _metrics_of(session, query, source, group)

    def model_version_metrics(
        self, model: str, version: int, source: str | None, group: str | None
    ) -> list[MetricRow]:
        """The reports of the trials reported with model version ``version`` of ``model``."""
        with self._db.read() as session:
            found_model, found_version = find_version(session, model, version)
            query = select(TrialSourceInfo.trial_id).where(
                TrialSourceInfo.model_id == found_model.id,
                TrialSourceInfo.model_version == found_version.version,
            )
            return _metrics_of(session, query, source, group)


def _metrics_of(
    session: Session, query: Any, source: str | None, group: str | None
) -> list[MetricRow]:
    if source is not None:
        query = query.where(TrialSourceInfo.trial_source_info_type == source)
    trial_ids = sorted(set(session.scalars(query)))
    if not trial_ids:
        return []
    stmt = select(Metric).where(Metric.trial_id.in_(trial_ids), Metric.archived.is_(False))
    if group:
        stmt = stmt.where(Metric.group == group)
    stmt = stmt.order_by(Metric.trial_id, Metric.group, Metric.total_batches, Metric.id)
    return [
        MetricRow(
            id=row.id,
            trial_id=row.trial_id,
            trial_run_id=row.trial_run_id,
            total_batches=row.total_batches,
            end_time=row.end_time,
            metrics=row.metrics,
            group=row.group,
            archived=row.archived,
        )
        for row in session.scalars(stmt)
    ]
