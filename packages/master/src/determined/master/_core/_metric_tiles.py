"""Downsampled metric series kept at write time, so that a chart never reads raw metric rows.

For each trial, metric group and metric, the numeric reports are summarised in *tiles*: buckets of
x (``total_batches``) ``2**level`` wide, anchored at 0, each holding the count and the first, last,
lowest and highest point. A trial keeps two levels (:data:`LEVELS`): the finest with at most
:data:`MAX_BUCKETS` buckets over ``[0, x_max]``, and one :data:`COARSE` levels up (at most 32
buckets, for charts of hundreds of trials); when the trial's x range doubles past ``MAX_BUCKETS``,
both move up, their tiles merged (never rebuilt from raw rows). A chart of any width reads one level, at most ``MAX_BUCKETS`` rows per trial whatever the number of reports, and merges
buckets further in Python when it wants them wider. Two levels rather than a full pyramid keep the
writes close to one tile row per touched finest bucket.

Writes: :func:`update_tiles` is called once per committed batch of the metrics writer, inside its
transaction, after the raw rows are stored. It aggregates the batch in Python, column by column
(both kept levels from the reports) and merges the result with one executemany of
``INSERT ... ON CONFLICT DO UPDATE``: no per-row round trip.

Rollbacks: a trial resumed from an earlier checkpoint archives the reports of older runs from its
first new report's step on (see ``_metrics.ingest_many``). ``metric_tile_series.run_id`` records
which run the tiles were last written by; the first batch of a newer run in a group whose range it
overlaps deletes that group's tiles from the start of the coarsest bucket holding the step and
rebuilds them from the unarchived raw rows from there on (once per restart, not per batch).

Raw rows stay where they were: exports (``det t metrics --csv``, the SDK's streams) read them.
"""

from __future__ import annotations

import bisect
import collections
import math
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import orjson
from sqlalchemy import Connection
from sqlalchemy.orm import Session

from determined.master._core._metrics import MetricReport
from determined.master.db import Run

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
_MERGE = (
    "n = metric_tiles.n + excluded.n, "
    "first_x = CASE WHEN excluded.first_x < metric_tiles.first_x "
    "THEN excluded.first_x ELSE metric_tiles.first_x END, "
    "first_y = CASE WHEN excluded.first_x < metric_tiles.first_x "
    "THEN excluded.first_y ELSE metric_tiles.first_y END, "
    "last_x = CASE WHEN excluded.last_x >= metric_tiles.last_x "
    "THEN excluded.last_x ELSE metric_tiles.last_x END, "
    "last_y = CASE WHEN excluded.last_x >= metric_tiles.last_x "
    "THEN excluded.last_y ELSE metric_tiles.last_y END, "
    "min_x = CASE WHEN excluded.min_y < metric_tiles.min_y "
    "THEN excluded.min_x ELSE metric_tiles.min_x END, "
    "min_y = CASE WHEN excluded.min_y < metric_tiles.min_y "
    "THEN excluded.min_y ELSE metric_tiles.min_y END, "
    "max_x = CASE WHEN excluded.max_y > metric_tiles.max_y "
    "THEN excluded.max_x ELSE metric_tiles.max_x END, "
    "max_y = CASE WHEN excluded.max_y > metric_tiles.max_y "
    "THEN excluded.max_y ELSE metric_tiles.max_y END"
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


def _ph(connection: Connection) -> str:
    return "?" if connection.dialect.paramstyle == "qmark" else "%s"


def _sql(connection: Connection, text: str) -> str:
    return text.replace("?", "%s") if _ph(connection) == "%s" else text


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


def series_of(
    points: Sequence[tuple[int, dict[str, Any]]],
) -> dict[str, tuple[list[int], list[float]]]:
    """``{metric: (xs, ys)}`` of the numeric values of ``(x, avg metrics)`` reports, in order.

    Column by column: a metric whose values are all finite numbers (the usual case) is taken with
    list comprehensions and builtins; others are filtered value by value."""
    xs_all = [x for x, _ in points]
    avgs = [values for _, values in points]
    names: dict[str, None] = {}
    for values in avgs:
        names.update(dict.fromkeys(values))
    out: dict[str, tuple[list[int], list[float]]] = {}
    for name in names:
        if not isinstance(name, str) or len(name) > MAX_NAME:
            continue  # stored raw, not charted (the tile key holds at most MAX_NAME characters)
        column: list[Any] = [values.get(name) for values in avgs]
        kinds = set(map(type, column))
        if kinds <= _NUMBER_TYPES:
            ys: list[float] = column if kinds == _FLOAT else [float(y) for y in column]
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


def tiles_at(xs: list[int], ys: list[float], level: int) -> dict[int, Tile]:
    """``{bucket: tile}`` of one metric's points (in write order) at ``level``. One tight loop:
    consecutive points of the same bucket (the usual case) cost no dict lookup."""
    buckets = ((xs[-1] - xs[0]) >> level) + 1 if xs else 1
    if len(xs) >= 4 * buckets and xs == sorted(xs):  # several points per bucket, in order
        return _sorted_tiles_at(xs, ys, level)
    out: dict[int, Tile] = {}
    current = None
    tile: Tile = []
    for x, y in zip(xs, ys, strict=True):
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


def _sorted_tiles_at(xs: list[int], ys: list[float], level: int) -> dict[int, Tile]:
    """:func:`tiles_at` of points in x order (the usual case): each bucket is a slice whose
    first, last, lowest and highest point builtins find (the earliest of equal values, as in the
    general loop), so the Python work is per bucket, not per point."""
    out: dict[int, Tile] = {}
    i, n = 0, len(xs)
    while i < n:
        bucket = xs[i] >> level
        j = bisect.bisect_left(xs, (bucket + 1) << level, i)
        seg = ys[i:j]
        low, high = min(seg), max(seg)
        at_low, at_high = i + seg.index(low), i + seg.index(high)
        out[bucket] = [
            j - i,
            xs[i],
            ys[i],
            xs[j - 1],
            ys[j - 1],
            xs[at_low],
            low,
            xs[at_high],
            high,
        ]
        i = j
    return out


def aggregate(
    points: Iterable[tuple[int, dict[str, Any]]], level: int
) -> dict[tuple[str, int], Tile]:
    """Tiles ``{(metric, bucket): tile}`` at ``level`` of ``(x, avg metrics)`` in write order."""
    return {
        (name, bucket): tile
        for name, (xs, ys) in series_of(list(points)).items()
        for bucket, tile in tiles_at(xs, ys, level).items()
    }


def _series_rows(
    trial_id: int,
    group: str,
    series: dict[str, tuple[list[int], list[float]]],
    low: int,
) -> list[tuple[Any, ...]]:
    """Rows of the kept levels ``low + LEVELS`` of ``series`` (see :func:`series_of`)."""
    rows: list[tuple[Any, ...]] = []
    for name, (xs, ys) in series.items():
        for offset in LEVELS:
            level = low + offset
            rows.extend(
                (trial_id, group, name, level, bucket, *tile)
                for bucket, tile in tiles_at(xs, ys, level).items()
            )
    return rows


def _upsert_tiles(connection: Connection, rows: list[tuple[Any, ...]]) -> None:
    """Merge ``rows`` into ``metric_tiles``: one executemany (SQLite's is a C loop; psycopg
    pipelines it; multi-row ``VALUES`` statements measured slower on PostgreSQL)."""
    if not rows:
        return
    marks = ", ".join([_ph(connection)] * 14)
    connection.exec_driver_sql(
        f"INSERT INTO metric_tiles ({_TILE_COLUMNS}) VALUES ({marks}) "
        f"ON CONFLICT (trial_id, metric_group, metric, level, bucket) DO UPDATE SET {_MERGE}",
        rows,
    )


def _upsert_states(connection: Connection, rows: list[tuple[Any, ...]]) -> None:
    if not rows:
        return
    marks = ", ".join([_ph(connection)] * 6)
    connection.exec_driver_sql(
        "INSERT INTO metric_tile_series (trial_id, metric_group, run_id, x_min, x_max, level_min) "
        f"VALUES ({marks}) ON CONFLICT (trial_id, metric_group) DO UPDATE SET "
        "run_id = excluded.run_id, x_min = excluded.x_min, x_max = excluded.x_max, "
        "level_min = excluded.level_min",
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
    kept level's tiles merged ``2**(new - old)`` buckets into one (at most ``MAX_BUCKETS`` rows
    per metric, read as plain tuples; once per doubling of the trial's x range)."""
    result = connection.exec_driver_sql(
        _sql(
            connection,
            "SELECT metric, level, bucket, n, first_x, first_y, last_x, last_y, min_x, min_y, "
            "max_x, max_y FROM metric_tiles WHERE trial_id = ? AND metric_group = ?",
        ),
        (trial_id, group),
    )
    try:
        rows = result.cursor.fetchall()
    finally:
        result.close()
    shift = new - old
    merged: dict[tuple[str, int, int], Tile] = {}
    for metric, level, bucket, *tile in sorted(rows, key=lambda r: r[2]):
        key = (metric, level + shift, bucket >> shift)
        have = merged.get(key)
        if have is None:
            merged[key] = tile
        else:
            merge(have, tile)
    connection.exec_driver_sql(
        _sql(connection, "DELETE FROM metric_tiles WHERE trial_id = ? AND metric_group = ?"),
        (trial_id, group),
    )
    _upsert_tiles(
        connection,
        [(trial_id, group, m, level, bucket, *tile) for (m, level, bucket), tile in merged.items()],
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


def update_tiles(session: Session, batch: Iterable[tuple[Run, Sequence[MetricReport]]]) -> None:
    """Merge a committed-together batch of metric reports into their trials' tiles.

    Call once per metrics-writer transaction, after the raw rows (and any rollback archival) are
    stored, with each trial's run and the reports accepted for it, in the order they were stored.
    Costs one state SELECT, one tile upsert and one state upsert for the whole batch (plus, rarely,
    a level promotion or a rollback rebuild of one trial group).
    """
    by_key: dict[tuple[int, str], list[MetricReport]] = collections.defaultdict(list)
    runs: dict[int, int] = {}
    for run, reports in batch:
        runs[run.id] = run.run_id
        for report in reports:
            by_key[(run.id, report.group)].append(report)
    if not by_key:
        return
    connection = session.connection()
    states = load_states(connection, list(runs))
    tile_rows: list[tuple[Any, ...]] = []
    state_rows: list[tuple[Any, ...]] = []
    for (trial_id, group), reports in by_key.items():
        run_id = runs[trial_id]
        points = [(int(r.steps), r.avg) for r in reports]
        xs = [x for x, _ in points]
        x_min, x_max = min(xs), max(xs)
        state = states.get((trial_id, group))
        if state is None:
            low = level_min(x_max)
        else:
            old_run, old_min, old_max, old_low = state
            low = max(old_low, level_min(max(old_max, x_max)))
            if low > old_low:
                _promote(connection, trial_id, group, old_low, low)
            if old_run < run_id and points[0][0] <= old_max:
                # A rollback: older runs' reports from this step on were just archived.
                top = low + COARSE
                start = (points[0][0] >> top) << top
                _cut(connection, trial_id, group, low, start)
                points = _raw_points(connection, trial_id, group, start) + [
                    p for p in points if p[0] < start
                ]
                x_max = max(x for x, _ in points)
                x_min = min([x for x, _ in points] + ([old_min] if old_min < start else []))
            else:
                x_min, x_max = min(x_min, old_min), max(x_max, old_max)
        tile_rows.extend(_series_rows(trial_id, group, series_of(points), low))
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
