"""Metric reads across trials and experiments: upstream's "compare trials" time series
(``CompareTrials``) and the experiment metric streams of its web UI (``ExpMetricNames``,
``MetricBatches``, ``TrialsSnapshot``, ``TrialsSample``).

Reads stay cheap on trials with many reports: a time series first reads only the ids and steps of
the trial's reports in range (the ``(trial_id, metric_group, total_batches)`` index), keeps at most
``max_datapoints`` of them evenly spread (the first and last always), and loads only those rows.
The streams read only reports newer than the last round (a cursor on the report id); metric names
come from the trials' summary metrics, never from the raw rows.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from determined.master._core import _metric_horizon
from determined.master._wire import APIError, clean_float, to_float, ts
from determined.master.db import Experiment, Metric, Run

GROUP_OF_TYPE = {"METRIC_TYPE_TRAINING": "training", "METRIC_TYPE_VALIDATION": "validation"}
"""The groups of upstream's deprecated ``MetricType`` (profiling has no group in det)."""
_TYPE_OF_GROUP = {group: kind for kind, group in GROUP_OF_TYPE.items()}
_INT32_MAX = 2**31 - 1


def metric_type(group: str) -> str:
    """Upstream's ``MetricType`` of a group (``METRIC_TYPE_UNSPECIFIED`` for custom groups)."""
    return _TYPE_OF_GROUP.get(group, "METRIC_TYPE_UNSPECIFIED")


def metric_group(kind: str | None, group: str | None, *, required: bool) -> str | None:
    """The group a request names by ``metricType`` (deprecated) or ``group``; 400 for both, an
    unknown type, or neither when ``required``."""
    if kind in (None, "", "METRIC_TYPE_UNSPECIFIED"):
        kind = None
    if kind is not None and group:
        raise APIError(400, "metricType, group: give one of them, not both")
    if kind is not None:
        if kind not in GROUP_OF_TYPE:
            raise APIError(
                400, f"metricType: must be one of {', '.join(GROUP_OF_TYPE)}, got {kind!r:.100}"
            )
        return GROUP_OF_TYPE[kind]
    if group:
        check_group(group, "group")
        return group
    if required:
        raise APIError(400, "metricType: a metric group is required (metricType or group)")
    return None


def check_group(group: str, field: str) -> None:
    """400 naming ``field`` for a group upstream refuses (empty, or with a dot)."""
    if not group or "." in group:
        raise APIError(
            400, f"{field}: a metric group must be non-empty, without '.': {group!r:.100}"
        )


def parse_metric_ids(ids: Sequence[str]) -> dict[str, list[str]]:
    """``["group.name", ...]`` as ``{group: [name, ...]}``; 400 naming ``metricIds`` otherwise."""
    out: dict[str, list[str]] = {}
    for text in ids:
        group, dot, name = text.partition(".")
        if not dot or not name:
            raise APIError(400, f"metricIds: expected <group>.<name>, got {text!r:.100}")
        check_group(group, "metricIds")
        out.setdefault(group, []).append(name)
    return out


def _values(row_metrics: dict[str, Any]) -> dict[str, Any]:
    """The averaged values of a stored report (every group keeps them in ``avg_metrics``)."""
    values = row_metrics.get("avg_metrics")
    if not isinstance(values, dict):
        values = row_metrics.get("validation_metrics")
    return values if isinstance(values, dict) else {}


def _epoch(values: dict[str, Any]) -> float | None:
    for key in ("epochs", "epoch"):
        number = to_float(values.get(key))
        if number is not None and math.isfinite(number):
            return number
    return None


def spread(count: int, wanted: int) -> list[int]:
    """At most ``wanted`` indexes into ``range(count)``, evenly spread, first and last kept."""
    if count <= wanted:
        return list(range(count))
    if wanted <= 1:
        return [count - 1] if wanted == 1 else []
    step = (count - 1) / (wanted - 1)
    return sorted({round(i * step) for i in range(wanted)})


def series(
    session: Session,
    trial_id: int,
    group: str,
    names: Sequence[str],
    max_points: int,
    start: int = 0,
    end: int = _INT32_MAX,
) -> list[dict[str, Any]]:
    """Upstream's ``DataPoint`` list of one trial and group between steps ``start`` and ``end``
    (both included), at most ``max_points`` reports, ordered by step; each point has ``values``
    for ``names`` and only reports holding at least one of them count."""
    keys = session.execute(
        select(Metric.id, Metric.total_batches)
        .where(
            Metric.trial_id == trial_id,
            Metric.group == group,
            Metric.archived.is_(False),
            Metric.total_batches >= start,
            Metric.total_batches <= end,
        )
        .order_by(Metric.total_batches, Metric.id)
    ).all()
    chosen = [keys[i][0] for i in spread(len(keys), max_points)]
    rows: list[Any] = []
    for first in range(0, len(chosen), 500):
        rows.extend(
            session.execute(
                select(Metric.total_batches, Metric.id, Metric.end_time, Metric.metrics).where(
                    Metric.id.in_(chosen[first : first + 500])
                )
            ).all()
        )
    rows.sort(key=lambda r: (r[0], r[1]))
    points = []
    for steps, _, end_time, stored in rows:
        values = _values(stored or {})
        if not any(name in values for name in names):
            continue
        points.append(
            {
                "batches": steps,
                "time": ts(end_time),
                "epoch": _epoch(values),
                "values": {name: clean_float(values.get(name)) for name in names},
            }
        )
    return points


def metric_names(session: Session, experiment_ids: Sequence[int]) -> dict[str, list[str]]:
    """``{group: sorted metric names}`` the experiments' trials reported (their summaries)."""
    found: dict[str, set[str]] = {}
    summaries = session.scalars(
        select(Run.summary_metrics).where(Run.experiment_id.in_(list(experiment_ids)))
    )
    for summary in summaries:
        for group, entries in (summary or {}).items():
            if isinstance(entries, dict):
                found.setdefault(group, set()).update(entries)
    return {group: sorted(names) for group, names in sorted(found.items())}


def _new_reports(
    session: Session,
    experiment_id: int,
    group: str,
    after: int,
    *,
    low: int = 0,
    high: int = _INT32_MAX,
) -> list[Any]:
    """``(id, trial id, steps, stored metrics)`` of the experiment's live reports of ``group``
    with ids above ``after`` and steps in ``[low, high]``, by id: none above the writer's horizon
    (``_metric_horizon``), so the next read from the last id returned skips no row."""
    query = (
        select(Metric.id, Metric.trial_id, Metric.total_batches, Metric.metrics)
        .join(Run, Run.id == Metric.trial_id)
        .where(
            Run.experiment_id == experiment_id,
            Metric.group == group,
            Metric.archived.is_(False),
            Metric.id > after,
            Metric.total_batches >= low,
            Metric.total_batches <= high,
        )
        .order_by(Metric.id)
    )
    horizon = _metric_horizon.visible_up_to(session)
    if horizon is not None:
        query = query.where(Metric.id <= horizon)
    return list(session.execute(query).all())


@dataclasses.dataclass
class Cursor:
    """What a stream has read so far: the newest report id and the steps already sent."""

    after: int = 0
    sent: set[int] = dataclasses.field(default_factory=set)


def new_batches(
    session: Session, experiment_id: int, group: str, name: str, cursor: Cursor
) -> list[int]:
    """Steps at which the experiment's trials reported ``name`` since ``cursor``, each once."""
    out: list[int] = []
    for report_id, _, steps, stored in _new_reports(session, experiment_id, group, cursor.after):
        cursor.after = report_id
        if name in _values(stored or {}) and steps not in cursor.sent:
            cursor.sent.add(steps)
            out.append(steps)
    return sorted(out)


def new_snapshot(
    session: Session,
    experiment_id: int,
    group: str,
    name: str,
    low: int,
    high: int,
    cursor: Cursor,
) -> list[dict[str, Any]]:
    """Upstream's ``TrialsSnapshotResponse.Trial`` per new report of ``name`` at steps in
    ``[low, high]``: the trial, its hyperparameters, the value and the steps."""
    reports = _new_reports(session, experiment_id, group, cursor.after, low=low, high=high)
    hparams: dict[int, Any] = {}
    trial_ids = {r[1] for r in reports}
    if trial_ids:
        hparams = dict(
            session.execute(select(Run.id, Run.hparams).where(Run.id.in_(trial_ids))).all()
        )
    out = []
    for report_id, trial_id, steps, stored in reports:
        cursor.after = report_id
        value = to_float(_values(stored or {}).get(name))
        if value is None:
            continue
        out.append(
            {
                "trialId": trial_id,
                "hparams": hparams.get(trial_id) or {},
                "metric": clean_float(value),
                "batchesProcessed": steps,
            }
        )
    return out


def top_trials(session: Session, experiment: Experiment, max_trials: int) -> list[int]:
    """The trials a sample follows (upstream's ``topTrials``): for adaptive searchers, among the
    trials that have validated, the furthest trained first (best searcher metric first among
    equals); for the others the best searcher metric first; 400 for a ``single`` experiment, as
    upstream."""
    searcher = (experiment.config or {}).get("searcher") or {}
    name = searcher.get("name")
    if name == "single":
        raise APIError(400, "single-trial experiments are not supported for trial sampling")
    metric = searcher.get("metric")
    smaller = searcher.get("smaller_is_better", True) is not False
    rows = session.execute(
        select(Run.id, Run.total_batches, Run.summary_metrics).where(
            Run.experiment_id == experiment.id
        )
    ).all()
    by_length = name in (
        "async_halving",
        "adaptive_asha",
        "adaptive",
        "adaptive_simple",
        "sync_halving",
    )
    ranked = []
    for run_id, steps, summary in rows:
        entry = ((summary or {}).get("validation") or {}).get(metric)
        best = to_float(entry.get("min" if smaller else "max")) if isinstance(entry, dict) else None
        if by_length and not (summary or {}).get("validation"):
            continue  # upstream joins the trial's validations: none yet, not sampled
        score = math.inf if best is None else (best if smaller else -best)
        ranked.append(((-(steps or 0), score) if by_length else (best is None, score), run_id))
    ranked.sort()
    return [run_id for _, run_id in ranked[:max_trials]]
