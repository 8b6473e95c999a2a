"""Tiles as columns: the arithmetic of ``_metric_tiles`` that touches no database.

Points of one metric (``xs``, ``ys`` in write order) become tiles at a level, tiles become
:data:`Columns` (one list per field, in bucket order), columns are cut into chunks of
``2**CHUNK_BITS`` buckets, merged with stored ones, and coarsened when a trial's levels move up;
all with builtins over whole columns where the points are in x order.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterable, Iterator, Sequence
from itertools import chain, count, islice, repeat
from typing import Any

MAX_NAME = 255
"""Longest metric name with tiles (the column's width)."""

CHUNK_BITS = 3
"""A row of ``metric_tiles`` holds the tiles of ``2**CHUNK_BITS`` consecutive buckets of one
metric and level: 8, so that a batch writes a few rows, not a row per bucket, while a trial
reporting step by step rewrites a small row per report and metric (~0.7 KiB; larger chunks made
single reports cost more: benchmarks/RESULTS.md, "Metric tiles in chunks")."""

Tile = list[Any]
"""``[n, first_x, first_y, last_x, last_y, min_x, min_y, max_x, max_y]`` (mutable while merged)."""


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
    return series_columns([x for x, _ in points], [values for _, values in points])


def series_columns(xs_all: list[int], avgs: list[dict[str, Any]]) -> Series:
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
        columns = sorted_columns(layout(xs, level), xs, ys)
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


def layout(xs: list[int], level: int) -> Layout:
    """The buckets of ``xs`` (non-decreasing) at ``level``: each a slice of consecutive points."""
    return runs(list(map(_rshift, xs, repeat(level))) if level else xs)


def runs(keys: Iterable[Any]) -> Layout:
    """``(keys, starts, ends, lasts)`` of the runs of equal consecutive ``keys`` (no key in two
    runs): a dict keeps each key's first position in order and its last index."""
    ends_of = dict(zip(keys, count(1)))
    ends = list(ends_of.values())
    return list(ends_of), [0, *ends[:-1]], ends, list(map(_sub, ends, repeat(1)))


def sorted_columns(layout: Layout, xs: list[int], ys: list[float]) -> list[Iterable[Any]]:
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


Columns = list[list[Any]]
"""A run of tiles of one metric and level in bucket order, column by column:
``[bucket, n, first_x, first_y, last_x, last_y, min_x, min_y, max_x, max_y]``."""


def columns_at(xs: list[int], ys: list[float], level: int, layout: Layout | None) -> Columns:
    """The tiles of one metric's points at ``level`` as :data:`Columns` (``layout``: the points'
    bucket layout when they are in x order, else None)."""
    if layout is None:  # out of x order (a rollback's rebuild): point by point
        rows = sorted(tiles_at(xs, ys, level).items())
        return [[b for b, _ in rows], *map(list, zip(*(t for _, t in rows), strict=True))]
    columns = sorted_columns(layout, xs, ys)
    size = len(layout[0])
    return [list(islice(column, size)) for column in columns]


def split(columns: Columns) -> Iterator[tuple[int, Columns]]:
    """``(chunk, its columns)`` of tiles in bucket order: ``2**CHUNK_BITS`` buckets per chunk."""
    buckets = columns[0]
    first, last = buckets[0] >> CHUNK_BITS, buckets[-1] >> CHUNK_BITS
    if first == last:
        yield first, columns
        return
    chunks, starts, ends, _ = runs(map(_rshift, buckets, repeat(CHUNK_BITS)))
    for chunk, start, end in zip(chunks, starts, ends, strict=True):
        yield chunk, [column[start:end] for column in columns]


def coarsen(columns: Columns, shift: int) -> Columns:
    """Tiles in bucket order merged ``2**shift`` into one (:func:`merge` in bucket order, with
    builtins over whole columns)."""
    buckets, n, fx, fy, lx, ly, mnx, mny, mxx, mxy = columns
    merged, starts, ends, lasts = runs(map(_rshift, buckets, repeat(shift)))
    if len(merged) == len(buckets):
        return [merged, *columns[1:]]
    spans = list(map(slice, starts, ends))
    lows, highs = list(map(mny.__getitem__, spans)), list(map(mxy.__getitem__, spans))
    low_y, high_y = list(map(min, lows)), list(map(max, highs))
    at_low = map(_add, starts, map(list.index, lows, low_y))
    at_high = map(_add, starts, map(list.index, highs, high_y))
    return [
        merged,
        list(map(sum, map(n.__getitem__, spans))),
        list(map(fx.__getitem__, starts)),
        list(map(fy.__getitem__, starts)),
        list(map(lx.__getitem__, lasts)),
        list(map(ly.__getitem__, lasts)),
        list(map(mnx.__getitem__, at_low)),
        low_y,
        list(map(mxx.__getitem__, at_high)),
        high_y,
    ]


def combine(stored: Columns, later: Columns) -> Columns:
    """A stored chunk's tiles with ``later`` ones (of reports written after them) merged in."""
    old, new = stored[0], later[0]
    if new[0] > old[-1]:  # the usual case: the new tiles continue the chunk
        return [a + b for a, b in zip(stored, later, strict=True)]
    if new[0] == old[-1]:  # ... or continue its last tile first
        tile = [column[-1] for column in stored[1:]]
        merge(tile, [column[0] for column in later[1:]])
        return [
            [*a[:-1], t, *b[1:]] for a, t, b in zip(stored, [old[-1], *tile], later, strict=True)
        ]
    tiles = {b: list(t) for b, *t in zip(*stored, strict=True)}
    for b, *t in zip(*later, strict=True):
        found = tiles.get(b)
        if found is None:
            tiles[b] = t
        else:
            merge(found, t)
    rows = sorted(tiles.items())
    return [[b for b, _ in rows], *map(list, zip(*(t for _, t in rows), strict=True))]
