"""Metric report bodies (upstream's ``TrialMetrics``) parsed into :class:`MetricReport` values.

The API edge owns the format; the metrics writer's thread runs these parsers on a request's body
just before the transaction that stores it (``_metric_requests.Deferred`` says why). Every error is
a 400 naming the field (``reports[3].metrics.stepsCompleted: must be an integer``), for that
request alone.
"""

from __future__ import annotations

import datetime
from itertools import repeat
from typing import Any

from determined.master import _wire
from determined.master._api._deps import json_object
from determined.master._api._plain_reports import INT64 as _INT64
from determined.master._api._plain_reports import SCALARS as _SCALARS
from determined.master._api._plain_reports import check_group, plain_columns
from determined.master._core._metrics import MetricReport
from determined.master.db import utcnow

MAX_METRIC_STRING = 64 * 1024
"""The longest string a metric value may be (a metric is a number, or a short label)."""
MAX_METRIC_NODES = 10_000
"""The most values (nested, counted) one non-numeric metric may hold; 64 levels at most."""
_NO_BATCH: tuple[Any, ...] = ()
"""The batch metrics of a report without any (a list per report would be one more object per report
for the collector to track while the report waits for its commit)."""


def _check_value(value: Any, where: str) -> None:
    """400 for a metric value the master will not store: a string over 64 KiB, or a list/object
    deeper than 64 levels or with more than :data:`MAX_METRIC_NODES` values."""
    if isinstance(value, str):
        if len(value) > MAX_METRIC_STRING:
            raise _wire.bad_request(f"{where}: a string of {len(value)} characters (at most 65536)")
        return
    stack = [(value, 0)]
    count = 0
    while stack:
        item, depth = stack.pop()
        count += 1
        if depth > 64 or count > MAX_METRIC_NODES:
            raise _wire.bad_request(
                f"{where}: nested deeper than 64 levels or over {MAX_METRIC_NODES} values"
            )
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
        elif isinstance(item, str) and len(item) > MAX_METRIC_STRING:
            raise _wire.bad_request(f"{where}: holds a string over 65536 characters")
        elif isinstance(item, int) and not isinstance(item, bool) and abs(item) > _INT64:
            raise _wire.bad_request(f"{where}: an integer beyond 64 bits")


def _check_values(metrics: dict[str, Any], where: str) -> None:
    """Every value of a metrics object checked; numbers (the usual case) cost one type test."""
    for key, value in metrics.items():
        if type(value) not in _SCALARS or (type(value) is int and abs(value) > _INT64):
            _check_value(value, f"{where}.{key}")


def _report_time(value: Any, now: datetime.datetime) -> datetime.datetime:
    if isinstance(value, str):
        try:  # the common case: an RFC 3339 UTC timestamp from det's client
            parsed = datetime.datetime.fromisoformat(value)
        except ValueError:
            return _wire.parse_ts(value) or now
        return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=datetime.timezone.utc)
    return _wire.parse_ts(value) or now


def parse_report(
    group: Any, body: Any, where: str = "metrics", now: datetime.datetime | None = None
) -> MetricReport:
    """One report body ``{trialRunId, stepsCompleted, reportTime, metrics: {avgMetrics,
    batchMetrics}}`` (camelCase or snake_case) of metric group ``group``.

    ``now``: the report time of a report without one (the request's arrival).

    Raises:
        APIError: 400 for a bad group, a non-object body or a field of the wrong type.
    """
    group = check_group(group)
    if not isinstance(body, dict):
        raise _wire.bad_request(f"{where}: must be an object")
    trial_run_id = body.get("trialRunId")
    if trial_run_id is None:
        trial_run_id = body.get("trial_run_id")
    if trial_run_id is not None and type(trial_run_id) is not int:
        try:
            trial_run_id = int(trial_run_id)
        except (TypeError, ValueError, OverflowError):
            raise _wire.bad_request(f"{where}.trialRunId: must be an integer") from None
    steps = body.get("stepsCompleted")
    if steps is None:
        steps = body.get("steps_completed", 0)
    if type(steps) is not int:
        try:
            steps = int(steps or 0)
        except (TypeError, ValueError, OverflowError):
            raise _wire.bad_request(f"{where}.stepsCompleted: must be an integer") from None
    inner = body.get("metrics") or {}
    if not isinstance(inner, dict):
        raise _wire.bad_request(f"{where}.metrics: must be an object")
    avg = inner.get("avgMetrics")
    if avg is None:
        avg = inner.get("avg_metrics")
        if avg is None:
            avg = {}
    if not isinstance(avg, dict):
        raise _wire.bad_request(f"{where}.metrics.avgMetrics: must be an object")
    for key in ("epoch", "epochs"):
        if key in avg and _wire.to_float(avg[key]) is None:
            raise _wire.bad_request(f"{where}.metrics.avgMetrics.{key}: must be a number")
    _check_values(avg, f"{where}.metrics.avgMetrics")
    if not -_INT64 <= steps <= _INT64 or (trial_run_id is not None and abs(trial_run_id) > _INT64):
        raise _wire.bad_request(f"{where}: stepsCompleted or trialRunId beyond 64 bits")
    batch = inner.get("batchMetrics")
    if batch is None:
        batch = inner.get("batch_metrics")
    if batch:
        if not isinstance(batch, list):
            raise _wire.bad_request(f"{where}.metrics.batchMetrics: must be a list")
        for index, entry in enumerate(batch):
            if not isinstance(entry, dict):
                raise _wire.bad_request(f"{where}.metrics.batchMetrics[{index}]: must be an object")
            _check_values(entry, f"{where}.metrics.batchMetrics[{index}]")
    report_time = body.get("reportTime")
    if report_time is None:
        report_time = body.get("report_time")
    return MetricReport(
        group,
        trial_run_id,
        steps,
        avg,
        batch or _NO_BATCH,
        _report_time(report_time, now or utcnow()),
    )


def parse_reports(
    pairs: list[tuple[Any, Any]], now: datetime.datetime | None = None
) -> list[MetricReport]:
    """``(group, body)`` pairs of one request; a single report's fields are named ``metrics.*``,
    those of a batch ``reports[i].metrics.*``. Reports without a time get the request's, ``now``
    (default: the present)."""
    now = now or utcnow()
    if len(pairs) > 1:
        plain = _parse_plain(pairs, now)
        if plain is not None:
            return plain
    for index, (group, body) in enumerate(pairs):
        if not isinstance(body, dict):
            raise _wire.bad_request(f"reports[{index}].metrics: must be an object")
        check_group(group)
    if len(pairs) == 1:
        return [parse_report(pairs[0][0], pairs[0][1], now=now)]
    try:
        return [parse_report(group, body, now=now) for group, body in pairs]
    except _wire.APIError:
        # Parse again naming the report: the message says which one is wrong.
        return [
            parse_report(group, body, f"reports[{index}].metrics", now)
            for index, (group, body) in enumerate(pairs)
        ]


def parse_batch(raw: bytes, now: datetime.datetime) -> list[MetricReport]:
    """The reports of det's batch body, ``{reports: [{group, metrics}, ...]}`` (``raw``), each
    without a time given ``now``."""
    reports = json_object(raw).get("reports")
    if not isinstance(reports, list) or not all(isinstance(r, dict) for r in reports):
        raise _wire.bad_request("reports: must be a list of {group, metrics} objects")
    pairs = [(_wire.get(r, "group") or "training", _wire.get(r, "metrics")) for r in reports]
    reports.clear()  # the {group, metrics} wrappers: garbage from here
    return parse_reports(pairs, now)


def batch_size(raw: bytes) -> int:
    """About how many reports det's batch body ``raw`` holds, without decoding it: a report has
    two ``"metrics"`` keys (its ``{group, metrics}`` entry's and its body's, both required; a
    metric of that name counts extra). A hint for sizing the writer's transactions: a miscount
    changes only how many requests share one."""
    return max(1, raw.count(b'"metrics"') // 2)


def _parse_plain(pairs: list[tuple[Any, Any]], now: datetime.datetime) -> list[MetricReport] | None:
    """A batch of plain reports (:func:`_plain_reports.plain_columns`) parsed over all reports at
    once; None for anything else (then each report is parsed, and refused, by
    :func:`parse_report`). Builds the same reports (tests/master/test_metric_reports.py)."""
    columns = plain_columns(pairs)
    if columns is None:
        return None
    groups, run_ids, steps, avgs = columns
    return list(map(MetricReport, groups, run_ids, steps, avgs, repeat(_NO_BATCH), repeat(now)))
