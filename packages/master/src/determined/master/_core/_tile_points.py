"""One trial group's points of a metrics-writer batch, for its chart tiles (``_metric_tiles``):
from parsed reports, or from the arrays of requests a helper prepared (``_prepared``)."""

from __future__ import annotations

import operator
from itertools import pairwise
from typing import Any

from determined.master._core import _tile_columns as tc
from determined.master._core._metrics import MetricReport
from determined.master._core._prepared import Prepared

_STEPS = operator.attrgetter("steps")
_AVG = operator.attrgetter("avg")


class Points:
    """One trial group's points of a batch: from parsed reports, or prepared ones' arrays."""

    __slots__ = ("first", "in_order", "last", "parts", "reports", "size", "xs")

    def __init__(self) -> None:
        self.reports: list[MetricReport] | None = None
        self.xs: list[int] = []
        """The reports' steps (parsed reports only)."""
        self.parts: list[Prepared] = []
        self.first = self.last = self.size = 0
        self.in_order = True

    @classmethod
    def of_reports(cls, reports: list[MetricReport]) -> Points:
        points = cls()
        points.reports = reports
        points.xs = xs = list(map(int, map(_STEPS, reports)))
        points.first, points.last, points.size = xs[0], xs[-1], len(xs)
        points.in_order = xs == sorted(xs)
        return points

    @classmethod
    def of_prepared(cls, parts: list[Prepared]) -> Points:
        points = cls()
        points.parts = parts
        points.first, points.last = parts[0].first_step, parts[-1].last_step
        points.size = sum(part.size for part in parts)
        points.in_order = all(part.in_order for part in parts) and all(
            later.first_step >= earlier.last_step for earlier, later in pairwise(parts)
        )
        return points

    def series(self) -> tc.Series:
        """``{metric: (xs, ys)}`` (``tc.series_columns``; arrays for prepared points)."""
        if self.reports is not None:
            return tc.series_columns(self.xs, list(map(_AVG, self.reports)))
        if len(self.parts) == 1:
            return self.parts[0].series
        joined: dict[tuple[int, ...], Any] = {}  # metrics sharing their xs still share them
        pieces: dict[str, tuple[list[Any], list[Any]]] = {}
        for part in self.parts:
            for name, (xs, ys) in part.series.items():
                got = pieces.setdefault(name, ([], []))
                got[0].append(xs)
                got[1].append(ys)
        out: tc.Series = {}
        for name, (xs_parts, ys_parts) in pieces.items():
            key = tuple(map(id, xs_parts))
            xs = joined.get(key)
            if xs is None:
                xs = joined[key] = _concatenated(xs_parts)
            out[name] = (xs, _concatenated(ys_parts))
        return out


def _concatenated(arrays: list[Any]) -> Any:
    out = arrays[0][:]
    for more in arrays[1:]:
        out += more
    return out
