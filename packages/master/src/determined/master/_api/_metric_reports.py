"""Metric report bodies (upstream's ``TrialMetrics``) parsed into :class:`MetricReport` values.

Parsing happens on the request's thread, before a report reaches the metrics writer: the single
writer thread only checks run ids against the database and stores. Every error is a 400 naming the
field (``reports[3].metrics.stepsCompleted: must be an integer``).
"""

from __future__ import annotations

import datetime
from typing import Any

from determined.master import _wire
from determined.master._core._metrics import MetricReport
from determined.master.db import utcnow


def check_group(group: Any) -> str:
    """A metric group name: non-empty, no ``.`` (it names a column prefix in queries)."""
    if not isinstance(group, str) or not group:
        raise _wire.bad_request("group: must be a non-empty string")
    if "." in group:
        raise _wire.bad_request(f"group: {group!r} must not contain '.'")
    return group


def _field(body: dict[str, Any], camel: str, snake: str, default: Any = None) -> Any:
    value = body.get(camel)
    if value is None:
        value = body.get(snake, default)
    return value


def _report_time(value: Any) -> Any:
    if isinstance(value, str):
        try:  # the common case: an RFC 3339 UTC timestamp from det's client
            parsed = datetime.datetime.fromisoformat(value)
        except ValueError:
            return _wire.parse_ts(value)
        return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=datetime.timezone.utc)
    return _wire.parse_ts(value) or utcnow()


def parse_report(group: Any, body: Any, where: str = "metrics") -> MetricReport:
    """One report body ``{trialRunId, stepsCompleted, reportTime, metrics: {avgMetrics,
    batchMetrics}}`` (camelCase or snake_case) of metric group ``group``.

    Raises:
        APIError: 400 for a bad group, a non-object body or a field of the wrong type.
    """
    group = check_group(group)
    if not isinstance(body, dict):
        raise _wire.bad_request(f"{where}: must be an object")
    trial_run_id = _field(body, "trialRunId", "trial_run_id")
    try:
        trial_run_id = int(trial_run_id) if trial_run_id is not None else None
    except (TypeError, ValueError):
        raise _wire.bad_request(f"{where}.trialRunId: must be an integer") from None
    steps = _field(body, "stepsCompleted", "steps_completed", 0)
    try:
        steps = int(steps or 0)
    except (TypeError, ValueError):
        raise _wire.bad_request(f"{where}.stepsCompleted: must be an integer") from None
    inner = body.get("metrics") or {}
    if not isinstance(inner, dict):
        raise _wire.bad_request(f"{where}.metrics: must be an object")
    avg = _field(inner, "avgMetrics", "avg_metrics")
    if avg is None:
        avg = {}
    if not isinstance(avg, dict):
        raise _wire.bad_request(f"{where}.metrics.avgMetrics: must be an object")
    for key in ("epoch", "epochs"):
        if key in avg and _wire.to_float(avg[key]) is None:
            raise _wire.bad_request(f"{where}.metrics.avgMetrics.{key}: must be a number")
    batch = _field(inner, "batchMetrics", "batch_metrics") or []
    report_time = _report_time(_field(body, "reportTime", "report_time"))
    return MetricReport(group, trial_run_id, steps, avg, batch, report_time)


def parse_reports(pairs: list[tuple[Any, Any]]) -> list[MetricReport]:
    """``(group, body)`` pairs of one request; a single report's fields are named ``metrics.*``,
    those of a batch ``reports[i].metrics.*``."""
    for index, (group, body) in enumerate(pairs):
        if not isinstance(body, dict):
            raise _wire.bad_request(f"reports[{index}].metrics: must be an object")
        check_group(group)
    if len(pairs) == 1:
        return [parse_report(pairs[0][0], pairs[0][1])]
    return [
        parse_report(group, body, f"reports[{index}].metrics")
        for index, (group, body) in enumerate(pairs)
    ]
