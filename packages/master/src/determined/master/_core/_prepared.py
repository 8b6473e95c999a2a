"""A request's plain metric reports made ready to store, by a helper process of the metrics writer.

The writer's thread shares the master's interpreter lock with the HTTP thread; on a 2-core host
the two together are what bounds ingestion (benchmarks/RESULTS.md). For the usual large request,
training reports of one run with numbers for metrics, everything that needs no database is done
here, in a helper process (``_writer_helpers``), while the writer stores the transaction before it:
the rows in the insert form of the database (``_metric_text``), each metric's values as one
``array`` for the run's summary, and the chart tiles' points. The writer then folds the arrays
into the summary with builtins and hands the rows to the database in one statement.

Imports nothing heavy: a helper process runs it without SQLAlchemy or the models.
"""

from __future__ import annotations

import datetime
import math
import sys
import traceback
from array import array
from collections.abc import Callable
from typing import Any, NamedTuple

from determined.master._core import _tile_columns as tc
from determined.master._metric_text import MetricRow, copy_buffer, steps_and_metrics_json

_NUMBERS = frozenset((float, int))


class Prepared(NamedTuple):
    """One request's reports, ready to store: a single group and run, steps as given."""

    trial_id: int
    group: str
    run_id: int
    now: datetime.datetime
    """The reports' time (the request's arrival: prepared reports carry none of their own)."""
    size: int
    first_step: int
    last_step: int
    max_step: int
    in_order: bool
    """Whether the steps never go down (else the chart tiles are merged in place)."""
    columns: dict[str, Any]
    """Per metric, the values of the reports that hold it, in order: an ``array('d')`` when all
    are ints and floats, else a list (what the run's summary folds: ``_metrics``)."""
    series: dict[str, tuple[Any, Any]]
    """The chart tiles' points, ``tc.series_columns`` as arrays (``q`` steps, ``d`` values)."""
    payload: str | bytes
    """The rows in the insert form of ``db._metric_inserts``: on SQLite the JSON array of
    ``[steps, metrics]`` of its one-statement insert (text), on PostgreSQL COPY text lines
    (bytes)."""


def prepare(
    trial_id: int,
    group: str,
    run_id: int,
    steps: list[int],
    avgs: list[dict[str, Any]],
    now: datetime.datetime,
    form: str,
) -> Prepared:
    """Reports (``steps`` and their ``avgMetrics``, already checked: ints, and flat objects of
    scalars) made ready to store in ``form``, ``"sqlite"`` or ``"postgresql"``
    (``db._metric_inserts.prepared_form``)."""
    rows: list[MetricRow] = [
        (trial_id, run_id, group, step, now, {"avg_metrics": avg, "batch_metrics": []}, False)
        for step, avg in zip(steps, avgs, strict=True)
    ]
    payload: str | bytes
    if form == "sqlite":
        payload = steps_and_metrics_json(rows)
    elif form == "postgresql":
        payload = copy_buffer(rows)
    else:
        raise ValueError(f"no prepared form for {form!r}")
    columns = _columns(avgs)
    return Prepared(
        trial_id=trial_id,
        group=group,
        run_id=run_id,
        now=now,
        size=len(steps),
        first_step=steps[0],
        last_step=steps[-1],
        max_step=max(steps),
        in_order=steps == sorted(steps),
        columns=columns,
        series=_series(steps, avgs, columns),
        payload=payload,
    )


def metric_columns(avgs: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """Each metric's values over the reports that hold it, in order (what a run's summary folds,
    ``_metrics``): one list per metric."""
    keys = avgs[0].keys()
    if all(values.keys() == keys for values in avgs):
        return {name: [values[name] for values in avgs] for name in keys}
    columns: dict[str, list[Any]] = {}
    for values in avgs:
        for name, raw in values.items():
            columns.setdefault(name, []).append(raw)
    return columns


def _columns(avgs: list[dict[str, Any]]) -> dict[str, Any]:
    """:func:`metric_columns`, as an ``array('d')`` where every value is an int or a float."""
    return {
        name: array("d", column) if set(map(type, column)) <= _NUMBERS else column
        for name, column in metric_columns(avgs).items()
    }


def _series(
    steps: list[int], avgs: list[dict[str, Any]], columns: dict[str, Any]
) -> dict[str, tuple[Any, Any]]:
    """The tiles' points as arrays (``tc.series_columns``); metrics sharing one steps column share
    one array. A metric every report holds as a finite number reuses its summary column."""
    shared: dict[int, array[int]] = {}
    out: dict[str, tuple[Any, Any]] = {}
    if len(columns) == len(avgs[0]) and all(len(values) == len(avgs[0]) for values in avgs):
        # every report holds the same metrics (the summary's columns are one per metric, in order)
        steps_array = array("q", steps)
        rest: list[str] = []
        for name, column in columns.items():
            total = sum(column) if type(column) is array else math.nan
            if total - total == 0.0 and len(name) <= tc.MAX_NAME:  # all finite numbers
                out[name] = (steps_array, column)
            else:
                rest.append(name)
        if not rest:
            return out
        avgs = [{name: values[name] for name in rest} for values in avgs]
    for name, (xs, ys) in tc.series_columns(steps, avgs).items():
        xs_array = shared.get(id(xs))
        if xs_array is None:
            xs_array = shared[id(xs)] = array("q", xs)
        out[name] = (xs_array, array("d", ys))
    return {name: out[name] for name in columns if name in out}  # the reports' order


def call(prepare: Callable[..., Prepared | None], *args: Any) -> Prepared | None:
    """``prepare(*args)``: how a helper process runs each request's own ``prepare`` callable
    (``_metrics_writer``: one job, many requests). An error is one request's: it is left to the
    writer's parser (which answers a bad body with its 400), with the traceback on stderr (the
    master's log), and the job's other requests stay prepared."""
    try:
        return prepare(*args)
    except Exception:
        traceback.print_exc(file=sys.stderr)
        return None
