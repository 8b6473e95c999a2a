"""Metric series for the UI's charts, read from the tiles the metrics writer keeps.

A learning-curve chart of 100 trials x 10,000 reports must not make the browser download a million
points, nor make the master read a million JSON rows. The metrics writer keeps, per trial, group
and metric, power-of-two buckets of x holding the count, first, last, lowest and highest point
(``_core/_metric_tiles``) at two levels. A chart wants buckets about one pixel column wide
(:func:`chart_level`): it reads the coarse level when that is fine enough (or when hundreds of
trials share the chart), else the finest, and merges the tiles it read into buckets of the width
it wants. It sends at most two points per bucket (the lowest and the highest in x order, or the
bucket's points when it holds two or fewer), plus each curve's first and last point, so spikes
survive and the payload is bounded by the chart's width. The raw ``metrics``
table is never read here; exports and the REST streams still read it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from determined.master._core import _metric_tiles, _tile_reads
from determined.master._core._metric_tiles import chart_level
from determined.master._core._tile_build import COARSE
from determined.master._core._tile_columns import merge, numeric
from determined.master.db import Database

__all__ = ["Curve", "TrialVersion", "chart_level", "curves", "tile_points", "to_number"]

MANY_TRIALS = 200
"""From this many trials on, a chart reads every trial's coarse level (at most 32 buckets each)."""


def to_number(value: Any) -> float | None:
    """A stored metric value as a finite float, or None (strings, objects, NaN, infinities)."""
    return numeric(value)


@dataclasses.dataclass(frozen=True)
class TrialVersion:
    """What identifies the state of a trial's reports: its run id (a restart may archive reports)
    and its ``last_activity`` (every metrics report moves it)."""

    run_id: int
    activity: str


@dataclasses.dataclass
class Curve:
    """A curve ready for JSON: its points (x as ints where whole, y rounded) and how many numeric
    reports it summarises."""

    x: list[float | int]
    y: list[float]
    points: int


def tile_points(tiles: Sequence[Sequence[Any]]) -> tuple[list[float], list[float], int]:
    """``(xs, ys, reports)`` of tiles in bucket order: per bucket its points when it holds two or
    fewer, else its lowest and highest point in x order; the curve's first and last point always."""
    xs: list[float] = []
    ys: list[float] = []
    total = 0
    last = len(tiles) - 1
    for i, tile in enumerate(tiles):
        n, fx, fy, lx, ly, mnx, mny, mxx, mxy = tile
        total += n
        if n <= 2:
            picked = [(fx, fy)] if n == 1 or (fx, fy) == (lx, ly) else [(fx, fy), (lx, ly)]
        else:
            a, b = (mnx, mny), (mxx, mxy)
            picked = [a] if a == b else ([a, b] if mnx <= mxx else [b, a])
            if i == 0 and picked[0] != (fx, fy):
                picked.insert(0, (fx, fy))
            if i == last and picked[-1] != (lx, ly):
                picked.append((lx, ly))
        for x, y in picked:
            xs.append(x)
            ys.append(y)
    return xs, ys, total


def round_values(values: list[float], digits: int = 6) -> list[float]:
    """Values rounded to ``digits`` significant digits (halves the JSON and makes it compress
    four times better; invisible on a chart)."""
    fmt = f"%.{digits}g"
    return [float(fmt % v) for v in values]


def compact_x(values: list[float]) -> list[float | int]:
    """Whole-number x values (batches) as ints: shorter JSON."""
    return [int(v) if float(v).is_integer() else v for v in values]


def rebucket(tiles: Sequence[Sequence[Any]], shift: int) -> list[Sequence[Any]]:
    """``[bucket, *tile]`` rows in bucket order merged ``2**shift`` buckets into one (the tiles
    alone, in bucket order)."""
    if shift <= 0:
        return [row[1:] for row in tiles]
    out: list[Any] = []
    current = None
    for row in tiles:
        bucket = row[0] >> shift
        if bucket != current:
            out.append(list(row[1:]))
            current = bucket
        else:
            merge(out[-1], list(row[1:]))
    return out


def _curve(tiles: Sequence[Sequence[Any]], shift: int) -> Curve:
    xs, ys, total = tile_points(rebucket(tiles, shift))
    return Curve(compact_x(xs), round_values(ys), total)


def _level(wanted: int, low: int, many: bool) -> int:
    """The kept level to read: the coarse one when it is fine enough or the chart is crowded."""
    return low + COARSE if many or wanted >= low + COARSE else low


def curves(
    db: Database, trial_ids: Sequence[int], group: str, metric: str, width: int
) -> dict[int, Curve]:
    """The curve of ``metric`` in ``group`` of each trial that reported it, in buckets fitting
    ``width`` columns over the trials' common x range. Two queries, or one more per distinct
    level read when trials' finest levels differ."""
    if not trial_ids:
        return {}
    with db.engine.connect() as connection:
        states = _metric_tiles.load_states(connection, trial_ids, group)
        if not states:
            return {}
        x0 = min(s[1] for s in states.values())
        x1 = max(s[2] for s in states.values())
        wanted = chart_level(x0, x1, width)
        many = len(states) >= MANY_TRIALS
        levels = {t: _level(wanted, s[3], many) for (t, _), s in states.items()}
        tiles = _tile_reads.read_tiles(connection, levels, group, metric)
    return {
        t: _curve(found, max(0, wanted - levels[t])) for (t, _), found in tiles.items() if found
    }


def trial_curves(db: Database, trial_id: int, width: int) -> dict[tuple[str, str], Curve]:
    """Every metric of every group of one trial, each group in buckets fitting ``width``."""
    out: dict[tuple[str, str], Curve] = {}
    with db.engine.connect() as connection:
        states = _metric_tiles.load_states(connection, [trial_id])
        for (_, group), (_, x0, x1, low) in sorted(states.items()):
            wanted = chart_level(x0, x1, width)
            level = _level(wanted, low, False)
            tiles = _tile_reads.read_tiles(connection, {trial_id: level}, group, None)
            for (_, metric), found in sorted(tiles.items()):
                if found:
                    out[(group, metric)] = _curve(found, max(0, wanted - level))
    return out
