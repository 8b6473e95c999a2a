"""Downsampled metric series kept at write time, so that a chart never reads raw metric rows.

For each trial, metric group and metric, the numeric reports are summarised in *tiles*: buckets of
x (``total_batches``) ``2**level`` wide, anchored at 0, each holding the count and the first, last,
lowest and highest point. A trial keeps two levels (:data:`LEVELS`): the finest with at most
:data:`MAX_BUCKETS` buckets over ``[0, x_max]``, and one :data:`COARSE` levels up (at most 32
buckets, for charts of hundreds of trials); when the trial's x range doubles past ``MAX_BUCKETS``,
both move up, their tiles merged (never rebuilt from raw rows). A chart of any width reads one
level, at most ``MAX_BUCKETS`` rows per trial whatever the number of reports, and merges buckets
further in Python when it wants them wider. Two levels rather than a full pyramid keep the writes
close to one tile row per touched finest bucket.

Writes: :func:`update_tiles` is called once per committed batch of the metrics writer, inside its
transaction, after the raw rows are stored. It aggregates the batch with builtins over whole
columns (both kept levels from the reports, no Python code per report or tile) and merges the
result with one ``INSERT ... ON CONFLICT DO UPDATE`` (``db._metric_inserts.upsert_rows``).

Rollbacks: a trial resumed from an earlier checkpoint archives the reports of older runs from its
first new report's step on (see ``_metrics.ingest_many``). ``metric_tile_series.run_id`` records
which run the tiles were last written by; the first batch of a newer run in a group whose range it
overlaps deletes that group's tiles from the start of the coarsest bucket holding the step and
rebuilds them from the unarchived raw rows from there on (once per restart, not per batch).

Raw rows stay where they were: exports (``det t metrics --csv``, the SDK's streams) read them.
"""

from __future__ import annotations

import collections
import math
import operator
from collections.abc import Iterable, Iterator, Sequence
from itertools import chain, count, repeat
from typing import Any

import orjson
from sqlalchemy import Connection
from sqlalchemy.orm import Session

from determined.master._core._metrics import MetricReport
from determined.master.db import Run
from determined.master.db._metric_inserts import upsert_rows

MAX_BUCKETS = 512
"""Buckets over ``[0, x_max]`` at a trial's finest level (a chart reads at most these per trial:
256 to 512 buckets, two points each, over a chart about a thousand pixels wide)."""
COARSE = 4
"""How many levels above the finest the coarse level sits (16 times wider buckets)."""
LEVELS = (0, COARSE)
"""The levels a trial keeps, relative to its finest."""
MAX_NAME = 255
"""Longest metric name with tiles (the column's width)."""
MIN_LEVEL = 1
"""Buckets are at least 2 wide: a bucket of one or two reports keeps both (first and last), so a
trial reporting every batch loses nothing, and a young trial writes half as many tiles."""

Tile = list[Any]
"""``[n, first_x, first_y, last_x, last_y, min_x, min_y, max_x, max_y]`` (mutable while merged)."""

_TILE_COLUMNS = (
    "trial_id, metric_group, metric, level, bucket, n, first_x, first_y, last_x, last_y, "
    "min_x, min_y, max_x, max_y"
)
# A later tile merged into a stored one (:func:`merge`'s rules; right-hand sides see the old row).
_MERGE = ", ".join(
    ["n = metric_tiles.n + excluded.n"]
    + [
        f"{column} = CASE WHEN excluded.{test} {op} metric_tiles.{test} "
        f"THEN excluded.{column} ELSE metric_tiles.{column} END"
        for test, op in (("first_x", "<"), ("last_x", ">="), ("min_y", "<"), ("max_y", ">"))
        for column in (test[:-1] + "x", test[:-1] + "y")
    ]
)


def numeric(value: Any) -> float | None:
    """A stored metric value as a finite float (numbers and numeric strings), else None."""
    if type(value) is float:
        return value if value - value == 0.0 else None
    if isinstance(value, (int, float)):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return None
    else:
        return None
    return number if math.isfinite(number) else None


def level_min(x_max: int) -> int:
    """The finest level kept for a trial whose highest x is ``x_max``: never below
    :data:`MIN_LEVEL`."""
    level = MIN_LEVEL
    x_max = max(0, int(x_max))
    while (x_max >> level) >= MAX_BUCKETS:
        level += 1
    return level


def chart_level(x0: float, x1: float, width: int) -> int:
    """The level whose buckets are at least ``(x1 - x0) / width`` wide (one per pixel column)."""
    wanted = (x1 - x0) / max(1, width)
    return 0 if wanted <= 1 else math.ceil(math.log2(wanted))


def _sql(connection: Connection, text: str) -> str:
    return text if connection.dialect.paramstyle == "qmark" else text.replace("?", "%s")


def merge(into: Tile, later: Tile) -> None:
    """Fold ``later`` (written after ``into``) into ``into``: the SQL upsert's rules in Python."""
    into[0] += later[0]
    if later[1] < into[1]:
        into[1], into[2] = later[1], later[2]
    if later[3] >= into[3]:
        into[3], into[4] = later[3], later[4]
    if later[6] < into[6]:
        into[5], into[6] = later[5], later[6]
    if later[8] > into[8]:
        into[7], into[8] = later[7], later[8]


Series = dict[str, tuple[list[int], list[float]]]


def series_of(points: Sequence[tuple[int, dict[str, Any]]]) -> Series:
    """``{metric: (xs, ys)}`` of the numeric values of ``(x, avg metrics)`` reports, in order."""
    return _series([x for x, _ in points], [values for _, values in points])


def _series(xs_all: list[int], avgs: list[dict[str, Any]]) -> Series:
    """:func:`series_of` of the columns ``xs_all`` and ``avgs``. Column by column: a metric whose
    values are all finite numbers (the usual case) shares ``xs_all`` and is gathered by builtins
    (no Python loop per report); others are filtered value by value."""
    out: Series = {}
    for name in dict.fromkeys(chain.from_iterable(avgs)):
        if not isinstance(name, str) or len(name) > MAX_NAME:
            continue  # stored raw, not charted (the tile key holds at most MAX_NAME characters)
        column: list[Any] = list(map(dict.get, avgs, repeat(name)))
        kinds = set(map(type, column))
        if kinds <= _NUMBER_TYPES:
            ys: list[float] = column if kinds == _FLOAT else list(map(float, column))
            total = sum(ys)  # finite only if every value is (NaN and infinities propagate)
            if total - total == 0.0 or all(y - y == 0.0 for y in ys):
                out[name] = (xs_all, ys)
                continue
        xs: list[int] = []
        kept: list[float] = []
        for x, raw in zip(xs_all, column, strict=True):
            y = numeric(raw)
            if y is not None:
                xs.append(x)
                kept.append(y)
        if xs:
            out[name] = (xs, kept)
    return out


_NUMBER_TYPES = frozenset({float, int})
_FLOAT = frozenset({float})
_add, _sub, _rshift = operator.add, operator.sub, operator.rshift


def tiles_at(xs: list[int], ys: list[float], level: int) -> dict[int, Tile]:
    """``{bucket: tile}`` of one metric's points (in write order) at ``level``."""
    if xs == sorted(xs):
        columns = _sorted_columns(_layout(xs, level), xs, ys)
        return {b: list(t) for b, *t in zip(*columns, strict=False)}  # n: endless when 1
    out: dict[int, Tile] = {}
    current = None
    tile: Tile = []
    for x, y in zip(xs, ys, strict=True):  # out of x order (a rollback's rebuild): point by point
        bucket = x >> level
        if bucket != current:
            current = bucket
            found = out.get(bucket)
            if found is None:
                out[bucket] = tile = [1, x, y, x, y, x, y, x, y]
                continue
            tile = found
        tile[0] += 1
        if x < tile[1]:
            tile[1] = x
            tile[2] = y
        if x >= tile[3]:
            tile[3] = x
            tile[4] = y
        if y < tile[6]:
            tile[5] = x
            tile[6] = y
        elif y > tile[8]:
            tile[7] = x
            tile[8] = y
    return out


Layout = tuple[list[int], list[int], list[int], list[int]]
"""Buckets of points in x order at one level: ``(buckets, starts, ends, lasts)`` (index ranges)."""


def _layout(xs: list[int], level: int) -> Layout:
    """The buckets of ``xs`` (non-decreasing) at ``level``: each a slice of consecutive points."""
    return _runs(list(map(_rshift, xs, repeat(level))) if level else xs)


def _runs(keys: Iterable[Any]) -> Layout:
    """``(keys, starts, ends, lasts)`` of the runs of equal consecutive ``keys`` (no key in two
    runs): a dict keeps each key's first position in order and its last index."""
    ends_of = dict(zip(keys, count(1)))
    ends = list(ends_of.values())
    return list(ends_of), [0, *ends[:-1]], ends, list(map(_sub, ends, repeat(1)))


def _sorted_columns(layout: Layout, xs: list[int], ys: list[float]) -> list[Iterable[Any]]:
    """Tile columns ``[bucket, n, first_x, first_y, last_x, last_y, min_x, min_y, max_x, max_y]``
    of points in x order (ties: the earliest written lowest and highest, as :func:`tiles_at`'s
    loop), built with builtins over whole columns: no Python code runs per bucket or point."""
    buckets, starts, ends, lasts = layout
    if len(buckets) == len(xs):  # one point per bucket
        return [buckets, repeat(1), xs, ys, xs, ys, xs, ys, xs, ys]
    x_at, y_at = xs.__getitem__, ys.__getitem__
    segments = list(map(y_at, map(slice, starts, ends)))
    lows, highs = list(map(min, segments)), list(map(max, segments))
    at_low = map(_add, starts, map(list.index, segments, lows))
    at_high = map(_add, starts, map(list.index, segments, highs))
    return [
        buckets,
        map(_sub, ends, starts),
        map(x_at, starts),
        map(y_at, starts),
        map(x_at, lasts),
        map(y_at, lasts),
        map(x_at, at_low),
        lows,
        map(x_at, at_high),
        highs,
    ]


def aggregate(
    points: Iterable[tuple[int, dict[str, Any]]], level: int
) -> dict[tuple[str, int], Tile]:
    """Tiles ``{(metric, bucket): tile}`` at ``level`` of ``(x, avg metrics)`` in write order."""
    return {
        (name, bucket): tile
        for name, (xs, ys) in series_of(list(points)).items()
        for bucket, tile in tiles_at(xs, ys, level).items()
    }


def _series_rows(trial_id: int, group: str, series: Series, low: int) -> list[tuple[Any, ...]]:
    """Rows of the kept levels ``low + LEVELS`` of ``series`` (see :func:`series_of`): metrics
    sharing their x column share its bucket layout."""
    rows: list[tuple[Any, ...]] = []
    layouts: dict[tuple[int, int], Layout] = {}
    ordered: dict[int, bool] = {}
    for name, (xs, ys) in series.items():
        in_order = ordered.get(id(xs))
        if in_order is None:
            in_order = ordered[id(xs)] = xs == sorted(xs)
        for offset in LEVELS:
            level = low + offset
            if not in_order:
                tiles = tiles_at(xs, ys, level).items()
                rows.extend((trial_id, group, name, level, b, *t) for b, t in tiles)
                continue
            layout = layouts.get((id(xs), level))
            if layout is None:
                layout = layouts[(id(xs), level)] = _layout(xs, level)
            head = (repeat(trial_id), repeat(group), repeat(name), repeat(level))
            rows.extend(zip(*head, *_sorted_columns(layout, xs, ys), strict=False))
    return rows


def _upsert_tiles(connection: Connection, rows: list[tuple[Any, ...]]) -> None:
    """Merge ``rows`` (no key twice) into ``metric_tiles``: SQLite's executemany (a C loop over
    one prepared statement); on PostgreSQL one COPY to a staging table and one ``INSERT ... SELECT
    ... ON CONFLICT`` (psycopg's executemany runs Python and a statement per row)."""
    upsert_rows(
        connection,
        "metric_tiles",
        tuple(name.strip() for name in _TILE_COLUMNS.split(",")),
        rows,
        f"ON CONFLICT (trial_id, metric_group, metric, level, bucket) DO UPDATE SET {_MERGE}",
    )


def _upsert_states(connection: Connection, rows: list[tuple[Any, ...]]) -> None:
    # A few rows (one per trial group): on PostgreSQL one executemany pipeline costs less than
    # upsert_rows' four statements (measured).
    if rows:
        connection.exec_driver_sql(
            _sql(
                connection,
                "INSERT INTO metric_tile_series (trial_id, metric_group, run_id, x_min, x_max, "
                "level_min) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (trial_id, metric_group) DO "
                "UPDATE SET run_id = excluded.run_id, x_min = excluded.x_min, "
                "x_max = excluded.x_max, level_min = excluded.level_min",
            ),
            rows,
        )


def _chunks(values: Sequence[Any], size: int = 500) -> Iterator[Sequence[Any]]:
    for start in range(0, len(values), size):
        yield values[start : start + size]


def load_states(
    connection: Connection, trial_ids: Sequence[int], group: str | None = None
) -> dict[tuple[int, str], tuple[int, int, int, int]]:
    """``{(trial, group): (run_id, x_min, x_max, level_min)}`` of ``trial_ids`` (one group or all)."""
    out: dict[tuple[int, str], tuple[int, int, int, int]] = {}
    for part in _chunks(list(trial_ids)):
        marks = ", ".join("?" * len(part))
        sql = (
            "SELECT trial_id, metric_group, run_id, x_min, x_max, level_min "
            f"FROM metric_tile_series WHERE trial_id IN ({marks})"
        )
        params: list[Any] = list(part)
        if group is not None:
            sql += " AND metric_group = ?"
            params.append(group)
        for t, g, run_id, x_min, x_max, low in connection.exec_driver_sql(
            _sql(connection, sql), tuple(params)
        ):
            out[(t, g)] = (run_id, x_min, x_max, low)
    return out


def _raw_points(
    connection: Connection, trial_id: int, group: str, start: int
) -> list[tuple[int, dict[str, Any]]]:
    """``(x, avg metrics)`` of the unarchived reports of a trial's group from x = ``start`` on,
    in write order (only on a rollback and in the migration's backfill)."""
    rows = connection.exec_driver_sql(
        _sql(
            connection,
            "SELECT total_batches, metrics FROM metrics WHERE trial_id = ? AND metric_group = ? "
            "AND archived = ? AND total_batches >= ? ORDER BY id",
        ),
        (trial_id, group, False, start),
    )
    out = []
    for x, stored in rows:
        if isinstance(stored, (str, bytes)):
            stored = orjson.loads(stored)
        values = stored.get("avg_metrics") if isinstance(stored, dict) else None
        out.append((int(x), values if isinstance(values, dict) else {}))
    return out


def _promote(connection: Connection, trial_id: int, group: str, old: int, new: int) -> None:
    """Move a trial group's levels from finest ``old`` to finest ``new`` (``new > old``): each
    kept level's tiles merged ``2**(new - old)`` buckets into one (:func:`merge` in bucket order;
    at most ``MAX_BUCKETS`` rows per metric, once per doubling of the trial's x range).

    PostgreSQL merges them in the server (window functions over the level's rows: no rows
    through the master's Python); SQLite, where that measured twice the CPU, in Python over whole
    columns with builtins."""
    if connection.dialect.name == "postgresql":
        shift = new - old
        for level in sorted((old + offset for offset in LEVELS), reverse=True):
            # Highest level first: a new level never collides with one not yet moved.
            connection.exec_driver_sql(
                _PROMOTE_SQL.format(level=level + shift, shift=shift), (trial_id, group, level)
            )
        return
    result = connection.exec_driver_sql(
        _sql(
            connection,
            "SELECT metric, level, bucket, n, first_x, first_y, last_x, last_y, min_x, min_y, "
            "max_x, max_y FROM metric_tiles WHERE trial_id = ? AND metric_group = ? "
            "ORDER BY metric, level, bucket",
        ),
        (trial_id, group),
    )
    try:
        rows = result.cursor.fetchall()
    finally:
        result.close()
    connection.exec_driver_sql(
        _sql(connection, "DELETE FROM metric_tiles WHERE trial_id = ? AND metric_group = ?"),
        (trial_id, group),
    )
    if not rows:
        return
    rows = sorted(rows, key=_TILE_KEY)  # the database's collation may order names differently
    shift = new - old
    metric, levels, buckets, n, fx, fy, lx, ly, mnx, mny, mxx, mxy = map(
        list, zip(*rows, strict=True)
    )
    buckets = list(map(_rshift, buckets, repeat(shift)))
    keys = zip(metric, map(_add, levels, repeat(shift)), buckets, strict=False)
    merged, starts, ends, lasts = _runs(keys)  # rows in key order: each new tile a run
    spans = list(map(slice, starts, ends))
    lows, highs = list(map(mny.__getitem__, spans)), list(map(mxy.__getitem__, spans))
    low_y, high_y = list(map(min, lows)), list(map(max, highs))
    at_low = map(_add, starts, map(list.index, lows, low_y))
    at_high = map(_add, starts, map(list.index, highs, high_y))
    tiles = (
        map(sum, map(n.__getitem__, spans)),
        map(fx.__getitem__, starts),
        map(fy.__getitem__, starts),
        map(lx.__getitem__, lasts),
        map(ly.__getitem__, lasts),
        map(mnx.__getitem__, at_low),
        low_y,
        map(mxx.__getitem__, at_high),
        high_y,
    )
    head = (repeat(trial_id), repeat(group), *zip(*merged, strict=True))
    _upsert_tiles(connection, list(zip(*head, *tiles, strict=False)))


_TILE_KEY = operator.itemgetter(0, 1, 2)
_PROMOTE_SQL = (
    "WITH old AS (DELETE FROM metric_tiles WHERE trial_id = %s AND metric_group = %s "
    f"AND level = %s RETURNING *) INSERT INTO metric_tiles ({_TILE_COLUMNS}) "
    "SELECT DISTINCT trial_id, metric_group, metric, {level}, bucket >> {shift}, SUM(n) OVER p, "
    + ", ".join(
        f"FIRST_VALUE({column}) OVER {window}"
        for window, columns in (("f", "first"), ("l", "last"), ("lo", "min"), ("hi", "max"))
        for column in (columns + "_x", columns + "_y")
    )
    + " FROM old WINDOW p AS (PARTITION BY metric, bucket >> {shift}), f AS (p ORDER BY bucket), "
    "l AS (p ORDER BY bucket DESC), lo AS (p ORDER BY min_y, bucket), "
    "hi AS (p ORDER BY max_y DESC, bucket)"
)


def _cut(connection: Connection, trial_id: int, group: str, low: int, start: int) -> None:
    """Delete a trial group's tiles of every level from x = ``start`` (a coarsest bucket's edge)."""
    connection.exec_driver_sql(
        _sql(
            connection,
            "DELETE FROM metric_tiles WHERE trial_id = ? AND metric_group = ? AND level = ? "
            "AND bucket >= ?",
        ),
        [(trial_id, group, low + offset, start >> (low + offset)) for offset in LEVELS],
    )


_GROUP = operator.attrgetter("group")
_STEPS = operator.attrgetter("steps")
_AVG = operator.attrgetter("avg")


def update_tiles(session: Session, batch: Iterable[tuple[Run, Sequence[MetricReport]]]) -> None:
    """Merge a committed-together batch of metric reports into their trials' tiles.

    Call once per metrics-writer transaction, after the raw rows (and any rollback archival) are
    stored, with each trial's run and the reports accepted for it, in the order they were stored.
    Costs one state SELECT, one tile upsert and one state upsert for the whole batch (plus, rarely,
    a level promotion or a rollback rebuild of one trial group).
    """
    by_key: dict[tuple[int, str], list[MetricReport]] = {}
    runs: dict[int, int] = {}
    for run, reports in batch:
        trial_id = run.id
        runs[trial_id] = run.run_id
        groups = set(map(_GROUP, reports))
        if len(groups) == 1:  # the usual case: one group per trial and batch
            by_key.setdefault((trial_id, groups.pop()), []).extend(reports)
            continue
        for report in reports:
            by_key.setdefault((trial_id, report.group), []).append(report)
    if not by_key:
        return
    connection = session.connection()
    states = load_states(connection, list(runs))
    tile_rows: list[tuple[Any, ...]] = []
    state_rows: list[tuple[Any, ...]] = []
    for (trial_id, group), reports in by_key.items():
        run_id = runs[trial_id]
        xs = list(map(int, map(_STEPS, reports)))
        avgs = list(map(_AVG, reports))
        x_min, x_max = min(xs), max(xs)
        state = states.get((trial_id, group))
        if state is None:
            low = level_min(x_max)
        else:
            old_run, old_min, old_max, old_low = state
            low = max(old_low, level_min(max(old_max, x_max)))
            if low > old_low:
                _promote(connection, trial_id, group, old_low, low)
            if old_run < run_id and xs[0] <= old_max:
                # A rollback: older runs' reports from this step on were just archived.
                top = low + COARSE
                start = (xs[0] >> top) << top
                _cut(connection, trial_id, group, low, start)
                points = _raw_points(connection, trial_id, group, start) + [
                    p for p in zip(xs, avgs, strict=True) if p[0] < start
                ]
                xs, avgs = [x for x, _ in points], [values for _, values in points]
                x_max = max(xs)
                x_min = min(xs + ([old_min] if old_min < start else []))
            else:
                x_min, x_max = min(x_min, old_min), max(x_max, old_max)
        tile_rows.extend(_series_rows(trial_id, group, _series(xs, avgs), low))
        state_rows.append((trial_id, group, run_id, x_min, x_max, low))
    _upsert_tiles(connection, tile_rows)
    _upsert_states(connection, state_rows)


def backfill(connection: Connection) -> int:
    """Build the tiles of every trial group from its unarchived raw rows (the migration that adds
    the tile tables runs this once). Returns how many trial groups it built."""
    pairs = connection.exec_driver_sql(
        _sql(
            connection,
            "SELECT trial_id, metric_group, MAX(trial_run_id) FROM metrics WHERE archived = ? "
            "GROUP BY trial_id, metric_group ORDER BY trial_id, metric_group",
        ),
        (False,),
    ).fetchall()
    for trial_id, group, run_id in pairs:
        rebuild(connection, trial_id, group, run_id)
    return len(pairs)


def rebuild(connection: Connection, trial_id: int, group: str, run_id: int) -> None:
    """Replace one trial group's tiles with those of its unarchived raw rows (``run_id``: the run
    that wrote the newest of them)."""
    store(connection, trial_id, group, run_id, _raw_points(connection, trial_id, group, -(2**62)))


def store(
    connection: Connection,
    trial_id: int,
    group: str,
    run_id: int,
    points: Sequence[tuple[int, dict[str, Any]]],
) -> None:
    """Replace one trial group's tiles with those of ``points`` (``(x, avg metrics)`` in write
    order): for rows stored behind the metrics writer's back (the migration, bulk loads)."""
    connection.exec_driver_sql(
        _sql(connection, "DELETE FROM metric_tiles WHERE trial_id = ? AND metric_group = ?"),
        (trial_id, group),
    )
    if not points:
        connection.exec_driver_sql(
            _sql(
                connection,
                "DELETE FROM metric_tile_series WHERE trial_id = ? AND metric_group = ?",
            ),
            (trial_id, group),
        )
        return
    xs = [x for x, _ in points]
    low = level_min(max(xs))
    rows = _series_rows(trial_id, group, series_of(points), low)
    for part in _chunks(rows, 5000):
        _upsert_tiles(connection, list(part))
    _upsert_states(connection, [(trial_id, group, run_id, min(xs), max(xs), low)])


def read_tiles(
    connection: Connection, levels: dict[int, int], group: str, metric: str | None
) -> dict[tuple[int, str], list[Tile]]:
    """``{(trial, metric): [bucket, *tile] in bucket order}`` of ``group`` at each trial's level of
    ``levels`` (``{trial: level}``), for one metric or (``None``) all of them. One query per
    distinct level."""
    by_level: dict[int, list[int]] = collections.defaultdict(list)
    for trial_id, level in levels.items():
        by_level[level].append(trial_id)
    out: dict[tuple[int, str], list[Tile]] = collections.defaultdict(list)
    for level, trial_ids in sorted(by_level.items()):
        for part in _chunks(sorted(trial_ids)):
            marks = ", ".join("?" * len(part))
            sql = (
                "SELECT trial_id, metric, bucket, n, first_x, first_y, last_x, last_y, min_x, min_y, "
                f"max_x, max_y FROM metric_tiles WHERE trial_id IN ({marks}) "
                "AND metric_group = ? AND level = ?"
            )
            params: list[Any] = [*part, group, level]
            if metric is not None:
                sql += " AND metric = ?"
                params.append(metric)
            sql += " ORDER BY trial_id, metric, bucket"
            # Tuples straight from the driver's cursor, no per-row Row objects (tens of thousands
            # of rows per chart).
            result = connection.exec_driver_sql(_sql(connection, sql), tuple(params))
            try:
                rows = result.cursor.fetchall()
            finally:
                result.close()
            key = None
            target: list[Tile] = []
            for row in rows:
                if (row[0], row[1]) != key:
                    key = (row[0], row[1])
                    target = out[key]
                target.append(row[2:])
    return out
