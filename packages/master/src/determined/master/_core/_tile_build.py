"""A trial group's new chart tile chunks from a batch and what it continues: a pure function.

:func:`build` turns one trial group's share of a metrics-writer batch, with the stored chunks the
batch may merge into (handed over by ``_metric_tiles.update_tiles``, which reads them), into the
encoded chunk rows to upsert and the chunks to keep in memory. It touches no database and imports
nothing heavy, so that it runs either in the writer's thread or in a helper process
(``_writer_helpers``), where the bucketing, merging and encoding of a large batch leave the master's
interpreter free for its HTTP thread.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import orjson

from determined.master._core import _tile_columns as tc
from determined.master._core._tile_columns import Columns, Series

COARSE = 4
"""How many levels above the finest the coarse level sits (16 times wider buckets)."""
LEVELS = (0, COARSE)
"""The levels a trial keeps, relative to its finest."""

ChunkKey = tuple[int, str, str, int, int]
"""``(trial_id, metric_group, metric, level, chunk)``: one row of ``metric_tiles``."""
Chunks = dict[tuple[str, int], tuple[int, list[list[Any]], int]]
"""``{(metric, level): (chunk, its tile columns, their encoded size)}``: what ``_tile_tails`` keeps,
the columns as built (decoding the stored JSON again cost as much as the merge)."""


class Work(NamedTuple):
    """One trial group's reports of a batch: points in x order, none before the stored x_max
    (a rollback's or an out-of-order batch's tiles are built by ``_metric_tiles`` in place)."""

    trial_id: int
    group: str
    low: int
    """The group's finest level after this batch."""
    series: Series
    """``{metric: (xs, ys)}`` (``tc.series_columns``): metrics sharing an x column share it."""
    size: int
    """How many reports (what the helper's threshold counts)."""
    continued: dict[tuple[str, int], tuple[int, Columns]]
    """``{(metric, level): (chunk, columns)}``: the stored chunk holding the stored x_max, the
    only one the batch can continue (none for a new group or a promoted one)."""
    promoted: tuple[int, list[tuple[str, int, bytes]]] | None = None
    """When the group's levels move up: the old finest level and every stored chunk ``(metric,
    level, data)`` in (metric, level, chunk) order, which the caller deleted; they are merged up
    and written back with the batch's."""


class Built(NamedTuple):
    rows: list[tuple[Any, ...]]
    """``(*ChunkKey, encoded columns)`` to upsert, no key twice."""
    tails: Chunks
    """The highest chunk written per metric and level (what ``_tile_tails`` keeps)."""


def series_chunks(trial_id: int, group: str, series: Series, low: int) -> dict[ChunkKey, Columns]:
    """The chunks of the kept levels ``low + LEVELS`` of ``series`` (see ``tc.series_of``):
    metrics sharing their x column share its bucket layout."""
    out: dict[ChunkKey, Columns] = {}
    layouts: dict[tuple[int, int], tc.Layout | None] = {}
    ordered: dict[int, bool] = {}
    for name, (xs, ys) in series.items():
        in_order = ordered.get(id(xs))
        if in_order is None:
            in_order = ordered[id(xs)] = xs == sorted(xs)
        for offset in LEVELS:
            level = low + offset
            key = (id(xs), level)
            if key not in layouts:
                layouts[key] = tc.layout(xs, level) if in_order else None
            columns = tc.columns_at(xs, ys, level, layouts[key])
            for chunk, part in tc.split(columns):
                out[(trial_id, group, name, level, chunk)] = part
    return out


def promoted_chunks(
    trial_id: int, group: str, shift: int, stored: Sequence[tuple[str, int, bytes]]
) -> dict[ChunkKey, Columns]:
    """Stored chunks ``(metric, level, data)`` in (metric, level, chunk) order, merged
    ``2**shift`` buckets into one and cut into chunks again, at their levels plus ``shift``."""
    levels: dict[tuple[str, int], Columns] = {}
    for metric, level, data in stored:
        columns = orjson.loads(data)
        found = levels.get((metric, level))
        if found is None:
            levels[(metric, level)] = columns
        else:
            for into, more in zip(found, columns, strict=True):
                into.extend(more)
    return {
        (trial_id, group, metric, level + shift, chunk): part
        for (metric, level), columns in levels.items()
        for chunk, part in tc.split(tc.coarsen(columns, shift))
    }


def _lists(series: Series) -> Series:
    """``series`` with lists for columns given as arrays (prepared reports' points, which travel
    to a helper as arrays: ``_prepared``); columns shared by several metrics stay shared."""
    converted: dict[int, list[Any]] = {}
    out: Series = {}
    for name, (xs, ys) in series.items():
        if type(xs) is not list:
            found = converted.get(id(xs))
            if found is None:
                found = converted[id(xs)] = list(xs)
            xs = found
        out[name] = (xs, ys if type(ys) is list else list(ys))
    return out


def build(work: Work) -> Built:
    """The chunk rows ``work`` writes (merged with what it continues) and the tails to keep."""
    trial_id, group = work.trial_id, work.group
    out: dict[ChunkKey, Columns] = {}
    if work.promoted is not None:
        old, stored = work.promoted
        out = promoted_chunks(trial_id, group, work.low - old, stored)
    for key, columns in series_chunks(trial_id, group, _lists(work.series), work.low).items():
        before = out.get(key)
        if before is None:
            found = work.continued.get((key[2], key[3]))
            if found is not None and found[0] == key[4]:
                before = found[1]
        out[key] = columns if before is None else tc.combine(before, columns)
    rows: list[tuple[Any, ...]] = []
    tails: Chunks = {}
    for key, columns in out.items():
        data = orjson.dumps(columns)
        rows.append((*key, data))
        last = tails.get((key[2], key[3]))
        if last is None or last[0] < key[4]:
            tails[(key[2], key[3])] = (key[4], columns, len(data))
    return Built(rows, tails)
