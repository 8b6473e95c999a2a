"""How trials sort: the ``sortBy`` values of ``GET /api/v1/experiments/{id}/trials``.

The master sorts with it before it pages (clients only pass ``sortBy`` through). As upstream, the two
validation sorts use the *signed* searcher metric (negated when larger is better), so ascending order
lists the best trials first whichever way the metric points; ties and every other sort fall back to
the trial id in the same direction. Trials without a value come last in either order.
"""

from __future__ import annotations

from typing import Any

from determined.master.db import Run

TRIAL_SORTS = (
    "SORT_BY_UNSPECIFIED",
    "SORT_BY_ID",
    "SORT_BY_START_TIME",
    "SORT_BY_END_TIME",
    "SORT_BY_STATE",
    "SORT_BY_BEST_VALIDATION_METRIC",
    "SORT_BY_LATEST_VALIDATION_METRIC",
    "SORT_BY_BATCHES_PROCESSED",
    "SORT_BY_DURATION",
    "SORT_BY_RESTARTS",
    "SORT_BY_CHECKPOINT_SIZE",
    "SORT_BY_LOG_RETENTION_DAYS",
)

_FIELDS = {
    "SORT_BY_START_TIME": "startTime",
    "SORT_BY_END_TIME": "endTime",
    "SORT_BY_STATE": "state",
    "SORT_BY_BATCHES_PROCESSED": "totalBatchesProcessed",
    "SORT_BY_DURATION": "wallClockTime",
    "SORT_BY_RESTARTS": "restarts",
    "SORT_BY_LOG_RETENTION_DAYS": "logRetentionDays",
}


_SQL_COLUMNS: dict[str, Any] = {
    "SORT_BY_UNSPECIFIED": Run.id,
    "SORT_BY_ID": Run.id,
    "SORT_BY_START_TIME": Run.start_time,
    "SORT_BY_END_TIME": Run.end_time,
    "SORT_BY_STATE": Run.state,
    "SORT_BY_BATCHES_PROCESSED": Run.total_batches,
    "SORT_BY_RESTARTS": Run.restarts,
}


def sql_sort_column(sort_by: str, smaller_is_better: bool = True) -> Any | None:
    """The column (or expression) the database orders ``sort_by`` by, the same order as
    :func:`sort_trial_json` (the caller adds "missing last" and the id tie-break); None for the
    sorts only the trials' JSON can give (latest validation, duration, checkpoint size)."""
    if sort_by == "SORT_BY_BEST_VALIDATION_METRIC":
        value = Run.searcher_metric_value
        return value if smaller_is_better else -value
    return _SQL_COLUMNS.get(sort_by)


def check_trial_sort(sort_by: str | None) -> str:
    """``sort_by`` if it is a known ``sortBy`` value (``None`` means by id); ValueError otherwise."""
    value = sort_by or "SORT_BY_UNSPECIFIED"
    if value not in TRIAL_SORTS:
        raise ValueError(f"sortBy: unsupported value {value!r}; one of {', '.join(TRIAL_SORTS)}")
    return value


def sort_trial_json(
    trials: list[dict[str, Any]],
    sort_by: str | None,
    *,
    descending: bool = False,
    searcher_metric: str | None = None,
    smaller_is_better: bool = True,
) -> list[dict[str, Any]]:
    """``trials`` (the API's trial JSON) in ``sort_by`` order; raises ValueError naming ``sortBy``
    for an unknown value."""
    sort_by = check_trial_sort(sort_by)
    sign = 1.0 if smaller_is_better else -1.0

    def value(trial: dict[str, Any]) -> Any:
        if sort_by in ("SORT_BY_UNSPECIFIED", "SORT_BY_ID"):
            return trial.get("id")
        if sort_by == "SORT_BY_CHECKPOINT_SIZE":
            return int(trial.get("totalCheckpointSize") or 0)
        if sort_by == "SORT_BY_BEST_VALIDATION_METRIC":
            metric = trial.get("searcherMetricValue")
            return None if metric is None else sign * float(metric)
        if sort_by == "SORT_BY_LATEST_VALIDATION_METRIC":
            latest = trial.get("latestValidation") or {}
            avg = (latest.get("metrics") or {}).get("avgMetrics") or {}
            metric = avg.get(searcher_metric or "")
            return None if not isinstance(metric, (int, float)) else sign * float(metric)
        return trial.get(_FIELDS[sort_by])

    keyed = [(value(t), t) for t in trials]
    present = [(v, t) for v, t in keyed if v is not None]
    missing = [t for v, t in keyed if v is None]
    present.sort(key=lambda pair: (pair[0], pair[1].get("id") or 0), reverse=descending)
    missing.sort(key=lambda t: t.get("id") or 0, reverse=descending)
    return [t for _, t in present] + missing
