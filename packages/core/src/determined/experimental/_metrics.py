"""Metric reports of trials, as ``iter_trials_metrics`` and ``Trial.iter_metrics`` yield them."""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Iterator, Sequence
from typing import Any

from determined.client import Client, Session
from determined.experimental._util import parse_time

TRAINING = "training"
VALIDATION = "validation"
INFERENCE_SOURCE = "TRIAL_SOURCE_INFO_TYPE_INFERENCE"
"""The trial source type ``report_task_using_checkpoint``/``..._model_version`` record."""


@dataclasses.dataclass
class TrialMetrics:
    """One metrics report of a trial.

    Attributes:
        trial_id: the trial that reported it.
        trial_run_id: the run (restart count + 1) of the trial that reported it.
        steps_completed: the ``steps_completed`` passed with the report.
        end_time: when the master received it.
        metrics: the reported metrics (``{name: value}``).
        group: the metric group ("training", "validation" or any custom group).
        batch_metrics: per-batch metrics, when the trial sent any.
    """

    trial_id: int
    trial_run_id: int
    steps_completed: int
    end_time: datetime.datetime | None
    metrics: dict[str, Any]
    group: str
    batch_metrics: list[dict[str, Any]] | None = None

    @property
    def total_batches(self) -> int:
        """Deprecated name of ``steps_completed``."""
        return self.steps_completed

    @classmethod
    def _from_json(cls, report: dict[str, Any], group: str | None = None) -> TrialMetrics:
        stored = report.get("metrics") or {}
        group = report.get("group") or group or TRAINING
        key = "validation_metrics" if group == VALIDATION else "avg_metrics"
        values = stored.get(key)
        if values is None:
            values = stored.get("avg_metrics") or stored.get("avgMetrics") or {}
        return cls(
            trial_id=int(report.get("trialId") or 0),
            trial_run_id=int(report.get("trialRunId") or 0),
            steps_completed=int(report.get("totalBatches") or 0),
            end_time=parse_time(report.get("endTime")),
            metrics=dict(values),
            group=group,
            batch_metrics=stored.get("batch_metrics"),
        )


class TrainingMetrics(TrialMetrics):
    """Deprecated: a ``TrialMetrics`` of the "training" group."""


class ValidationMetrics(TrialMetrics):
    """Deprecated: a ``TrialMetrics`` of the "validation" group."""


def iter_trials_metrics(
    session: Session,
    trial_ids: Sequence[int],
    group: str,
    cls: type[TrialMetrics] = TrialMetrics,
) -> Iterator[TrialMetrics]:
    """Stream the reports of ``group`` for ``trial_ids`` from the master."""
    ids = [int(t) for t in trial_ids]
    if not ids:
        raise ValueError("trial_ids: give at least one trial id")
    if not isinstance(group, str) or not group:
        raise ValueError(f"group: must be a metric group name, got {group!r}")
    for chunk in Client(session).trials.metrics(ids, group):
        for report in chunk.get("metrics") or []:
            yield cls._from_json(report, group)
