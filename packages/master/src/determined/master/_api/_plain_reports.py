"""Plain batches of metric reports, checked column by column, and prepared in a helper process.

A plain batch is the shape det's and upstream's clients send: ``{trialRunId, stepsCompleted,
metrics: {avgMetrics}}`` per report, integer ids and steps, scalar metric values, no batch metrics
or report times. :func:`plain_columns` checks one with builtins over whole columns (no Python code
per report) and accepts only what ``_metric_reports.parse_report`` accepts. :func:`prepare_batch`
is what the metrics writer's helper process runs on a request's raw body (``_core._prepared``):
it imports nothing heavy, and leaves anything not plain (or any error) to the writer's parser.
"""

from __future__ import annotations

import datetime
from itertools import chain, repeat
from operator import itemgetter
from typing import Any

import orjson

from determined.master import _wire
from determined.master._core._prepared import Prepared, prepare

COMMON_GROUPS = frozenset(("training", "validation"))
SCALARS = (float, int, bool, type(None))
"""The types a plain metric value has."""
INT64 = 2**63 - 1

PlainColumns = tuple[list[str], list[int], list[int], list[dict[str, Any]]]
"""``(groups, trial run ids, steps, avgMetrics objects)`` of a plain batch, report by report."""


def check_group(group: Any) -> str:
    """A metric group name: non-empty, no ``.`` (it names a column prefix in queries)."""
    if not isinstance(group, str) or not group:  # first: a list or object is not hashable
        raise _wire.bad_request("group: must be a non-empty string")
    if "." in group:
        raise _wire.bad_request(f"group: {group!r} must not contain '.'")
    return group


def plain_columns(pairs: list[tuple[Any, Any]]) -> PlainColumns | None:
    """The columns of ``(group, body)`` pairs when every report is plain, else None."""
    groups: list[Any] = list(map(_FIRST, pairs))
    bodies: list[Any] = list(map(_SECOND, pairs))
    if set(map(type, groups)) != _STR or set(map(type, bodies)) != _DICT:
        return None
    distinct = set(groups)
    if not distinct <= COMMON_GROUPS:
        try:
            for group in distinct:
                check_group(group)
        except _wire.APIError:
            return None
    steps: list[Any] = list(map(dict.get, bodies, repeat("stepsCompleted")))
    run_ids: list[Any] = list(map(dict.get, bodies, repeat("trialRunId")))
    inners: list[Any] = list(map(dict.get, bodies, repeat("metrics")))
    if set(map(type, steps)) != _INT or set(map(type, run_ids)) != _INT:
        return None
    if set(map(type, inners)) != _DICT:
        return None
    if min(steps) < -INT64 or max(steps) > INT64 or max(map(abs, run_ids)) > INT64:
        return None
    avgs: list[Any] = list(map(dict.get, inners, repeat("avgMetrics")))
    if set(map(type, avgs)) != _DICT:
        return None
    if any(map(dict.get, inners, repeat("batchMetrics"))) or any(
        map(dict.get, inners, repeat("batch_metrics"))
    ):
        return None
    if any(map(dict.__contains__, avgs, repeat("epoch"))) or any(
        map(dict.__contains__, avgs, repeat("epochs"))
    ):
        return None
    values = list(chain.from_iterable(map(dict.values, avgs)))
    kinds = set(map(type, values))
    if not kinds <= _PLAIN_VALUES:
        return None
    if int in kinds and max(abs(v) for v in values if type(v) is int) > INT64:
        return None
    for key in ("reportTime", "report_time"):  # reports with their own times: one by one
        if list(map(dict.get, bodies, repeat(key))).count(None) != len(bodies):
            return None
    return groups, run_ids, steps, avgs


def batch_pairs(body: Any) -> list[tuple[Any, Any]] | None:
    """The ``(group, metrics)`` pairs of det's batch body ``{reports: [{group, metrics}, ...]}``
    (decoded), or None when it is not that shape."""
    reports = body.get("reports") if isinstance(body, dict) else None
    if not isinstance(reports, list) or not all(isinstance(r, dict) for r in reports):
        return None
    return [(_wire.get(r, "group") or "training", _wire.get(r, "metrics")) for r in reports]


def prepare_batch(raw: bytes, now: datetime.datetime, trial_id: int, form: str) -> Prepared | None:
    """det's batch body ``raw`` prepared to store in ``form`` (``_core._prepared``), when it is
    two or more plain reports of one group other than validation (the searcher hears those, in
    the writer) and one run; None for anything else, which the writer's parser then takes."""
    try:
        pairs = batch_pairs(orjson.loads(raw))
    except orjson.JSONDecodeError:
        return None
    if pairs is None or len(pairs) < 2:
        return None
    columns = plain_columns(pairs)
    if columns is None:
        return None
    groups, run_ids, steps, avgs = columns
    group, run_id = groups[0], run_ids[0]
    if group == "validation" or groups.count(group) != len(groups):
        return None
    if run_ids.count(run_id) != len(run_ids):
        return None
    return prepare(trial_id, group, run_id, steps, avgs, now, form)


_FIRST = itemgetter(0)
_SECOND = itemgetter(1)
_STR = {str}
_DICT = {dict}
_INT = {int}
_PLAIN_VALUES = frozenset(SCALARS)
