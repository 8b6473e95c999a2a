"""Metric series for the UI's charts: an incremental in-memory cache and per-pixel decimation.

A learning-curve chart of 100 trials x 10,000 reports must not make the browser download and parse a
million points, and must not make the master parse a million JSON rows on every refresh:

- :class:`SeriesCache` keeps, per (trial, group, metric), the reported ``(batches, value)`` pairs in
  compact ``array('d')`` columns together with the highest ``metrics.id`` it has seen; a refresh
  asks the database only for newer rows (one query for every warm trial, one for every cold trial,
  never one per trial). A trial whose ``run_id`` changed (it restarted and may have rolled back,
  archiving later reports) is reloaded from scratch.
- :func:`decimate` cuts a series down to the minimum and maximum of each bucket of x (about one
  bucket per pixel column of the chart, see :func:`bucket_width`), so spikes survive and the payload
  is bounded by the chart's width, not by the number of reports. The cache keeps each decimated
  view until its series changes.
"""

from __future__ import annotations

import bisect
import collections
import dataclasses
import math
import threading
from array import array
from typing import Any

from sqlalchemy import select

from determined.master.db import Database, Metric

MAX_CACHED_POINTS = 10_000_000
"""Reported points kept in memory (16 bytes each, so at most ~160 MB): least recently used series
are dropped beyond."""
MAX_VIEW_POINTS = 2_000_000
"""Decimated points kept ready for JSON (~60 bytes each as Python numbers, so ~120 MB)."""


def to_number(value: Any) -> float | None:
    """A stored metric value as a finite float, or None (strings, objects, NaN, infinities)."""
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


@dataclasses.dataclass(frozen=True)
class TrialVersion:
    """What identifies the state of a trial's reports: its run id (a restart may archive reports)
    and its ``last_activity`` (every metrics report moves it)."""

    run_id: int
    activity: str


@dataclasses.dataclass
class Series:
    """The reports of one metric of one trial, in ``batches`` order."""

    version: TrialVersion
    last_id: int = 0
    xs: array[float] = dataclasses.field(default_factory=lambda: array("d"))
    ys: array[float] = dataclasses.field(default_factory=lambda: array("d"))

    def add(self, row_id: int, x: float, y: float) -> None:
        if row_id <= self.last_id:
            return
        self.last_id = row_id
        if not self.xs or x >= self.xs[-1]:
            self.xs.append(x)
            self.ys.append(y)
            return
        at = bisect.bisect_right(self.xs, x)
        self.xs.insert(at, x)
        self.ys.insert(at, y)

    def stamp(self) -> tuple[TrialVersion, int, int]:
        """What identifies this series' content (a view computed from it stays valid while the
        stamp does)."""
        return self.version, self.last_id, len(self.xs)


class SeriesCache:
    """Per-master cache of metric series (thread-safe; database reads happen outside the lock)."""

    def __init__(self, db: Database, max_points: int = MAX_CACHED_POINTS) -> None:
        self.db = db
        self.max_points = max_points
        self._entries: collections.OrderedDict[tuple[int, str, str], Series] = (
            collections.OrderedDict()
        )
        self._size = 0
        self._views: collections.OrderedDict[tuple[int, str, str], tuple[Any, ...]] = (
            collections.OrderedDict()
        )
        self._view_size = 0
        self._lock = threading.Lock()
        self.queries = 0
        """Database queries issued so far (tests check that a refresh costs O(1) queries)."""

    def get(self, versions: dict[int, TrialVersion], group: str, metric: str) -> dict[int, Series]:
        """The up-to-date series of ``metric`` in ``group`` for each trial of ``versions``.

        At most two queries whatever the number of trials: one for trials never loaded (or
        restarted), one for the reports newer than what is cached of trials that reported since.
        """
        cold, stale = self._classify(versions, group, metric)
        fresh = {t: Series(versions[t]) for t in cold}
        if cold:
            _fill_sorted(fresh, self._rows(cold, group, metric, after=0))
        new_rows: list[tuple[int, int, float, float]] = []
        if stale:
            for trial_id, row_id, x, raw in self._rows(
                list(stale), group, metric, after=min(stale.values())
            ):
                y = to_number(raw)
                if y is not None:
                    new_rows.append((trial_id, row_id, float(x), y))
        out: dict[int, Series] = {}
        with self._lock:
            for trial_id, series in fresh.items():
                self._put((trial_id, group, metric), series)
            for trial_id, row_id, x, y in new_rows:
                entry = self._entries.get((trial_id, group, metric))
                if entry is not None:
                    before = len(entry.xs)
                    entry.add(row_id, x, y)
                    self._size += len(entry.xs) - before
            for trial_id in stale:
                entry = self._entries.get((trial_id, group, metric))
                if entry is not None:
                    entry.version = versions[trial_id]
            for trial_id in versions:
                key = (trial_id, group, metric)
                entry = self._entries.get(key)
                if entry is None:  # evicted meanwhile: serve what was just loaded
                    entry = fresh.get(trial_id) or Series(versions[trial_id])
                else:
                    self._entries.move_to_end(key)
                out[trial_id] = entry
            self._evict()
        return out

    def view(
        self, trial_id: int, group: str, metric: str, series: Series, bucket: float
    ) -> tuple[list[float | int], list[float]]:
        """``series`` decimated to buckets ``bucket`` wide, ready for JSON: computed once per
        bucket width and series content (a finished trial's curve is never decimated twice)."""
        key = (trial_id, group, metric)
        stamp = series.stamp()
        with self._lock:
            cached = self._views.get(key)
            if cached is not None and cached[0] == bucket and cached[1] == stamp:
                self._views.move_to_end(key)
                return cached[2], cached[3]
        xs, ys = decimate(series.xs, series.ys, bucket)
        view = (bucket, stamp, compact_x(xs), round_values(ys))
        with self._lock:
            old = self._views.pop(key, None)
            if old is not None:
                self._view_size -= len(old[2])
            self._views[key] = view
            self._view_size += len(xs)
            while self._view_size > MAX_VIEW_POINTS and len(self._views) > 1:
                _, dropped = self._views.popitem(last=False)
                self._view_size -= len(dropped[2])
        return view[2], view[3]

    def _classify(
        self, versions: dict[int, TrialVersion], group: str, metric: str
    ) -> tuple[list[int], dict[int, int]]:
        """(trials to load in full, {trial: last cached row id} of trials to top up)."""
        cold: list[int] = []
        stale: dict[int, int] = {}
        with self._lock:
            for trial_id, version in versions.items():
                entry = self._entries.get((trial_id, group, metric))
                if entry is not None and entry.version == version:
                    continue
                if entry is not None and entry.version.run_id == version.run_id and entry.last_id:
                    stale[trial_id] = entry.last_id
                else:
                    cold.append(trial_id)
        return cold, stale

    def cold(self, versions: dict[int, TrialVersion], group: str, metric: str) -> list[int]:
        """The trials of ``versions`` whose series :meth:`get` would have to load in full."""
        return self._classify(versions, group, metric)[0]

    def preview(
        self, versions: dict[int, TrialVersion], group: str, metric: str, every: int
    ) -> dict[int, Series]:
        """About one report in ``every`` of each trial (one query, nothing cached): a first
        picture of curves whose full load takes a while. Sampling by row id reads only the
        sampled rows, so it costs about 1/``every`` of the full load."""
        series = {t: Series(v) for t, v in versions.items()}
        if series:
            _fill_sorted(series, self._rows(list(series), group, metric, after=0, every=every))
        return series

    def _put(self, key: tuple[int, str, str], series: Series) -> None:
        old = self._entries.pop(key, None)
        if old is not None:
            self._size -= len(old.xs)
        self._entries[key] = series
        self._size += len(series.xs)

    def _evict(self) -> None:
        while self._size > self.max_points and len(self._entries) > 1:
            _, old = self._entries.popitem(last=False)
            self._size -= len(old.xs)

    def _rows(
        self, trial_ids: list[int], group: str, metric: str, after: int, every: int = 1
    ) -> list[Any]:
        """(trial id, row id, batches, raw value) of the unarchived reports of ``trial_ids``:
        newer than ``after`` in id order, or all of them (or those whose id is a multiple of
        ``every``) in (trial, batches) order.

        On SQLite the statement goes straight to the driver, and ``json_extract`` hands numbers
        back as numbers: at a million reports, SQLAlchemy's per-row processing and a text round
        trip would cost more than the query itself.
        """
        self.queries += 1
        order = "id" if after else "trial_id, total_batches, id"
        if self.db.is_sqlite and '"' not in metric:
            marks = ", ".join("?" * len(trial_ids))
            newer = "AND id > ? " if after else ""
            sample = "AND id % ? = 0 " if every > 1 else ""
            sql = (
                "SELECT trial_id, id, total_batches, json_extract(metrics, ?) FROM metrics "
                f"WHERE trial_id IN ({marks}) AND metric_group = ? AND archived = 0 {newer}"
                f"{sample}ORDER BY {order}"
            )
            params = (
                f'$.avg_metrics."{metric}"',
                *trial_ids,
                group,
                *([after] if after else []),
                *([every] if every > 1 else []),
            )
            with self.db.engine.connect() as connection:
                return list(connection.exec_driver_sql(sql, params).fetchall())
        value = Metric.metrics[("avg_metrics", metric)].as_string()
        stmt = select(Metric.trial_id, Metric.id, Metric.total_batches, value).where(
            Metric.trial_id.in_(trial_ids),
            Metric.group == group,
            Metric.archived.is_(False),
        )
        if every > 1:
            stmt = stmt.where(Metric.id % every == 0)
        if after:
            stmt = stmt.where(Metric.id > after).order_by(Metric.id)
        else:
            stmt = stmt.order_by(Metric.trial_id, Metric.total_batches, Metric.id)
        with self.db.engine.connect() as connection:
            return list(connection.execute(stmt).all())


def _fill_sorted(series: dict[int, Series], rows: list[Any]) -> None:
    """Append rows sorted by (trial, batches) to fresh series: the cold path, one tight loop."""
    current = None
    append_x = append_y = None
    last_id = 0
    target: Series | None = None
    for trial_id, row_id, x, raw in rows:
        if trial_id != current:
            if target is not None:
                target.last_id = last_id
            current = trial_id
            target = series[trial_id]
            append_x, append_y = target.xs.append, target.ys.append
            last_id = target.last_id
        if row_id > last_id:
            last_id = row_id
        if type(raw) is float:
            if raw - raw != 0.0:  # NaN or an infinity
                continue
            y = raw
        else:
            number = to_number(raw)
            if number is None:
                continue
            y = number
        append_x(x)  # type: ignore[misc]
        append_y(y)  # type: ignore[misc]
    if target is not None:
        target.last_id = last_id


def bucket_width(x0: float, x1: float, buckets: int) -> float:
    """A round bucket width giving at most ``buckets`` buckets over [x0, x1].

    Buckets are anchored at 0 and rounded (1, 1.5, 2, 3, 4, 5, 6, 8 x 10^k), so they stay put
    while running trials extend the range: only the curves that changed are decimated again.
    """
    raw = (x1 - x0) / max(1, buckets)
    if not raw > 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(raw))
    for mantissa in (1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0):
        if mantissa * power >= raw * (1 - 1e-12):
            return mantissa * power
    return 10.0 * power  # pragma: no cover - the loop always returns


def decimate(xs: array[float], ys: array[float], bucket: float) -> tuple[list[float], list[float]]:
    """At most 2 points per bucket of width ``bucket`` (buckets anchored at x = 0): the minimum
    and the maximum, in x order, plus the last point. Series short enough are returned whole."""
    n = len(xs)
    if n == 0:
        return [], []
    span = math.floor(xs[-1] / bucket) - math.floor(xs[0] / bucket) + 1
    if n <= 2 * span:
        return xs.tolist(), ys.tolist()
    out_x: list[float] = []
    out_y: list[float] = []
    lo = 0
    while lo < n:
        edge = (math.floor(xs[lo] / bucket) + 1) * bucket
        hi = max(lo + 1, bisect.bisect_left(xs, edge, lo))
        if hi - lo <= 2:
            out_x.extend(xs[lo:hi])
            out_y.extend(ys[lo:hi])
        else:
            seg = ys[lo:hi]
            i_low = lo + seg.index(min(seg))
            i_high = lo + seg.index(max(seg))
            first, second = (i_low, i_high) if i_low <= i_high else (i_high, i_low)
            out_x.append(xs[first])
            out_y.append(ys[first])
            if second != first:
                out_x.append(xs[second])
                out_y.append(ys[second])
        lo = hi
    if out_x[-1] != xs[-1]:
        out_x.append(xs[-1])
        out_y.append(ys[-1])
    return out_x, out_y


def round_values(values: list[float], digits: int = 6) -> list[float]:
    """Values rounded to ``digits`` significant digits (halves the JSON; invisible on a chart)."""
    fmt = f"{{:.{digits}g}}"
    return [float(fmt.format(v)) for v in values]


def compact_x(values: list[float]) -> list[float | int]:
    """Whole-number x values (batches) as ints: shorter JSON."""
    return [int(v) if v.is_integer() else v for v in values]
