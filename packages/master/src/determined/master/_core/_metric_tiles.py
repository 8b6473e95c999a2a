"""Downsampled metric series kept at write time, so that a chart never reads raw metric rows.

For each trial, metric group and metric, the numeric reports are summarised in *tiles*: buckets of
x (``total_batches``) ``2**level`` wide, anchored at 0, each holding the count and the first, last,
lowest and highest point. A trial keeps two levels (:data:`LEVELS`): the finest with at most
:data:`MAX_BUCKETS` buckets over ``[0, x_max]``, and one :data:`COARSE` levels up (at most 32
buckets, for charts of hundreds of trials); when the trial's x range doubles past ``MAX_BUCKETS``,
both move up, their tiles merged (never rebuilt from raw rows). A chart of any width reads one
level, at most ``MAX_BUCKETS`` rows per trial whatever the number of reports, and merges buckets
further in Python when it wants them wider. Two levels rather than a full pyramid keep the writes
close to one tile per touched finest bucket.

Storage: a row of ``metric_tiles`` is a *chunk*, the tiles of an aligned run of 8 buckets
(:data:`CHUNK_BITS`) of one metric and level, column by column (JSON: ``[buckets, n, first_x,
first_y, last_x, last_y, min_x, min_y, max_x, max_y]``). A row per tile made the tiles cost more
than the raw rows for young trials (a batch of 500 reports at the finest level wrote ~250 rows per
metric, and each doubling of the x range rewrote a trial's ~1,600 tile rows). A batch continuing
a chunk merges into it; the chunk the writer wrote last per metric and level is kept in memory
(``_tile_tails``), so a trial reporting step by step does not read it back.

Writes: :func:`start_tiles` is called once per batch of the metrics writer, inside its transaction,
before the raw rows are stored, and :meth:`TileUpdate.finish` after them. It reads the stored
chunks the batch continues (one SELECT, or from memory), aggregates the batch with builtins over
whole columns (both kept levels from the reports, no Python code per report or tile), merges, and
writes the chunks back (one upsert). The aggregation and merge of a trial group continuing its
range in x order is ``_tile_build.build``, run by a helper process for a large batch
(``_writer_helpers``) while the writer stores the raw rows.

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
import operator
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import chain
from typing import Any

import orjson
from sqlalchemy import Connection
from sqlalchemy.orm import Session

from determined.master._core import _tile_columns as tc
from determined.master._core._metrics import MetricReport
from determined.master._core._prepared import Prepared
from determined.master._core._tile_build import (
    COARSE,
    LEVELS,
    ChunkKey,
    Chunks,
    Work,
    promoted_chunks,
    series_chunks,
)
from determined.master._core._tile_columns import CHUNK_BITS, Columns, Tile
from determined.master._core._tile_points import Points
from determined.master._core._tile_tails import TAILS, State, database_key
from determined.master._core._writer_helpers import HELPERS, Job
from determined.master.db import Run
from determined.master.db._metric_inserts import upsert_rows

MAX_BUCKETS = 512
"""Buckets over ``[0, x_max]`` at a trial's finest level (a chart reads at most these per trial:
256 to 512 buckets, two points each, over a chart about a thousand pixels wide)."""
MIN_LEVEL = 1
"""Buckets are at least 2 wide: a bucket of one or two reports keeps both (first and last), so a
trial reporting every batch loses nothing, and a young trial writes half as many tiles."""


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


def paramstyle_sql(connection: Connection, text: str) -> str:
    """``text`` with ``?`` marks in the connection's DBAPI paramstyle (``%s`` for psycopg)."""
    return text if connection.dialect.paramstyle == "qmark" else text.replace("?", "%s")


def aggregate(
    points: Iterable[tuple[int, dict[str, Any]]], level: int
) -> dict[tuple[str, int], Tile]:
    """Tiles ``{(metric, bucket): tile}`` at ``level`` of ``(x, avg metrics)`` in write order."""
    return {
        (name, bucket): tile
        for name, (xs, ys) in tc.series_of(list(points)).items()
        for bucket, tile in tc.tiles_at(xs, ys, level).items()
    }


def write_chunks(
    connection: Connection, chunks: Iterable[tuple[ChunkKey, Columns]]
) -> list[tuple[Any, ...]]:
    """Store chunks (no key twice), replacing any stored under the same key: SQLite's
    executemany; PostgreSQL's COPY to a staging table and one ``INSERT ... SELECT``. Returns the
    rows written, ``(*key, encoded columns)``."""
    rows = [(*key, orjson.dumps(columns)) for key, columns in chunks]
    upsert_rows(connection, "metric_tiles", _CHUNK_COLUMNS, rows, _CHUNK_UPSERT)
    return rows


_CHUNK_COLUMNS = ("trial_id", "metric_group", "metric", "level", "chunk", "data")
_CHUNK_UPSERT = (
    "ON CONFLICT (trial_id, metric_group, metric, level, chunk) DO UPDATE SET data = excluded.data"
)


def _stored_chunks(connection: Connection, keys: Sequence[ChunkKey]) -> dict[ChunkKey, Columns]:
    """The stored chunks of ``keys`` (those that exist), decoded. An OR of whole keys: each term
    an index lookup on SQLite and PostgreSQL (SQLite scans the table for a row-value
    ``IN (VALUES ...)``)."""
    out: dict[ChunkKey, Columns] = {}
    for part in in_parts(keys, 200):
        terms = " OR ".join([_KEY_TERM] * len(part))
        rows = connection.exec_driver_sql(
            paramstyle_sql(
                connection, f"SELECT {', '.join(_CHUNK_COLUMNS)} FROM metric_tiles WHERE {terms}"
            ),
            tuple(chain.from_iterable(part)),
        )
        for *key, data in rows:
            out[tuple(key)] = orjson.loads(data)
    return out


_KEY_TERM = "(trial_id = ? AND metric_group = ? AND metric = ? AND level = ? AND chunk = ?)"


def _upsert_states(connection: Connection, rows: list[tuple[Any, ...]]) -> None:
    # A few rows (one per trial group): on PostgreSQL one executemany pipeline costs less than
    # upsert_rows' four statements (measured).
    if rows:
        connection.exec_driver_sql(
            paramstyle_sql(
                connection,
                "INSERT INTO metric_tile_series (trial_id, metric_group, run_id, x_min, x_max, "
                "level_min) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (trial_id, metric_group) DO "
                "UPDATE SET run_id = excluded.run_id, x_min = excluded.x_min, "
                "x_max = excluded.x_max, level_min = excluded.level_min",
            ),
            rows,
        )


def in_parts(values: Sequence[Any], size: int = 500) -> Iterator[Sequence[Any]]:
    """``values`` in slices of ``size`` (statements' parameter lists stay short)."""
    for start in range(0, len(values), size):
        yield values[start : start + size]


def load_states(
    connection: Connection, trial_ids: Sequence[int], group: str | None = None
) -> dict[tuple[int, str], tuple[int, int, int, int]]:
    """``{(trial, group): (run_id, x_min, x_max, level_min)}`` of ``trial_ids`` (one group or all)."""
    out: dict[tuple[int, str], tuple[int, int, int, int]] = {}
    for part in in_parts(list(trial_ids)):
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
            paramstyle_sql(connection, sql), tuple(params)
        ):
            out[(t, g)] = (run_id, x_min, x_max, low)
    return out


def _raw_points(
    connection: Connection, trial_id: int, group: str, start: int
) -> list[tuple[int, dict[str, Any]]]:
    """``(x, avg metrics)`` of the unarchived reports of a trial's group from x = ``start`` on,
    in write order (only on a rollback and in the migration's backfill)."""
    rows = connection.exec_driver_sql(
        paramstyle_sql(
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


def _take_all(connection: Connection, trial_id: int, group: str) -> list[tuple[str, int, bytes]]:
    """Delete a trial group's chunks and return them, ``(metric, level, data)`` in (metric,
    level, chunk) order (a promotion writes them back merged)."""
    rows = connection.exec_driver_sql(
        paramstyle_sql(
            connection,
            "SELECT metric, level, data FROM metric_tiles WHERE trial_id = ? AND metric_group = ? "
            "ORDER BY metric, level, chunk",
        ),
        (trial_id, group),
    ).fetchall()
    connection.exec_driver_sql(
        paramstyle_sql(
            connection, "DELETE FROM metric_tiles WHERE trial_id = ? AND metric_group = ?"
        ),
        (trial_id, group),
    )
    return [(metric, level, data) for metric, level, data in rows]


def _promote(connection: Connection, trial_id: int, group: str, old: int, new: int) -> None:
    """Move a trial group's levels from finest ``old`` to finest ``new`` (``new > old``): each
    kept level's tiles merged ``2**(new - old)`` buckets into one (at most ``MAX_BUCKETS`` tiles
    per metric in a few chunk rows, once per doubling of the trial's x range)."""
    stored = _take_all(connection, trial_id, group)
    write_chunks(connection, promoted_chunks(trial_id, group, new - old, stored).items())


def _cut(connection: Connection, trial_id: int, group: str, low: int, start: int) -> None:
    """Delete a trial group's tiles of every level from x = ``start`` (a coarsest bucket's edge):
    the chunk holding it keeps its tiles before it, later chunks go."""
    for level in (low + offset for offset in LEVELS):
        bucket = start >> level
        chunk = bucket >> CHUNK_BITS
        where = "trial_id = ? AND metric_group = ? AND level = ?"
        rows = connection.exec_driver_sql(
            paramstyle_sql(
                connection, f"SELECT metric, data FROM metric_tiles WHERE {where} AND chunk = ?"
            ),
            (trial_id, group, level, chunk),
        ).fetchall()
        connection.exec_driver_sql(
            paramstyle_sql(connection, f"DELETE FROM metric_tiles WHERE {where} AND chunk >= ?"),
            (trial_id, group, level, chunk),
        )
        kept = []
        for metric, data in rows:
            columns = orjson.loads(data)
            end = bisect.bisect_left(columns[0], bucket)
            if end:
                kept.append(((trial_id, group, metric, level, chunk), [c[:end] for c in columns]))
        write_chunks(connection, kept)


_GROUP = operator.attrgetter("group")
_STEPS = operator.attrgetter("steps")
_AVG = operator.attrgetter("avg")


def update_tiles(session: Session, batch: Iterable[tuple[Run, Sequence[MetricReport]]]) -> None:
    """Merge a committed-together batch of metric reports into their trials' tiles.

    Call once per metrics-writer transaction, after the raw rows (and any rollback archival) are
    stored, with each trial's run and the reports accepted for it, in the order they were stored.
    Costs one state SELECT, one SELECT of the stored chunks the batch continues that are not kept
    in memory, one chunk upsert and one state upsert for the whole batch (plus, rarely, a level
    promotion or a rollback rebuild of one trial group).
    """
    start_tiles(session, batch).finish()


class TileUpdate:
    """A batch's tiles on their way (:func:`start_tiles`): :meth:`finish` writes them once the
    batch's raw rows are stored; :meth:`abandon` drops them when the transaction fails."""

    def __init__(
        self,
        session: Session,
        building: Job | None = None,
        recorded: list[tuple[tuple[int, str], State | None, State]] | None = None,
        in_place: dict[tuple[int, str], list[MetricReport]] | None = None,
        known: tuple[dict[int, int], dict[tuple[int, str], State]] | None = None,
    ) -> None:
        self._session = session
        self._building = building
        self._recorded = recorded or []
        self._in_place = in_place
        self._known = known
        """The batch's runs ``{trial: run_id}`` and the stored states, for ``in_place``."""

    def finish(self) -> None:
        session = self._session
        connection = session.connection()
        db = database_key(connection)
        if self._building is not None:
            built = self._building.result()
            rows = [row for one in built for row in one.rows]
            if rows:
                upsert_rows(connection, "metric_tiles", _CHUNK_COLUMNS, rows, _CHUNK_UPSERT)
            _upsert_states(connection, [(*key, *after) for key, _, after in self._recorded])
            for (key, before, after), one in zip(self._recorded, built, strict=True):
                TAILS.record_on_commit(session, (db, *key), before, after, one.tails)
        if self._in_place and self._known:
            _update_in_place(session, self._in_place, *self._known, db)

    def abandon(self) -> None:
        if self._building is not None:
            self._building.abandon()


def start_tiles(
    session: Session,
    batch: Iterable[tuple[Run, Sequence[MetricReport]]],
    prepared: Iterable[tuple[Run, Sequence[Prepared]]] = (),
    reports_of: Callable[[int], list[MetricReport]] | None = None,
) -> TileUpdate:
    """:func:`update_tiles` begun before the batch's raw rows are stored: a large batch's chunks
    are built by a helper process meanwhile (``_writer_helpers``).

    A trial group whose reports continue its stored range in x order (training, step after step)
    is built by ``_tile_build.build``; a rollback or points out of order are merged in place at
    :meth:`TileUpdate.finish` (:func:`_update_in_place`), once the rollback's archival is stored.

    ``prepared``: trials whose requests came prepared by a helper (``_prepared``; a trial is in
    ``batch`` or here, not both), their points as arrays; ``reports_of`` gives such a trial's
    reports parsed, for the rare group that is merged in place.
    """
    by_key: dict[tuple[int, str], Points] = {}
    runs: dict[int, int] = {}
    for run, reports in batch:
        trial_id = run.id
        runs[trial_id] = run.run_id
        groups = set(map(_GROUP, reports))
        if len(groups) == 1:  # the usual case: one group per trial and batch
            by_key[(trial_id, groups.pop())] = Points.of_reports(list(reports))
            continue
        grouped: dict[str, list[MetricReport]] = {}
        for report in reports:
            grouped.setdefault(report.group, []).append(report)
        for group, some in grouped.items():
            by_key[(trial_id, group)] = Points.of_reports(some)
    for run, parts in prepared:
        runs[run.id] = run.run_id
        grouped_parts: dict[str, list[Prepared]] = {}
        for part in parts:
            grouped_parts.setdefault(part.group, []).append(part)
        for group, some_parts in grouped_parts.items():
            by_key[(run.id, group)] = Points.of_prepared(some_parts)
    if not by_key:
        return TileUpdate(session)
    connection = session.connection()
    states = load_states(connection, list(runs))
    db = database_key(connection)
    works: list[Work] = []
    missing: dict[ChunkKey, Work] = {}  # continued chunks not kept in memory
    recorded: list[tuple[tuple[int, str], State | None, State]] = []
    in_place: dict[tuple[int, str], list[MetricReport]] = {}
    for (trial_id, group), points in by_key.items():
        run_id = runs[trial_id]
        first, last = points.first, points.last
        state = states.get((trial_id, group))
        if not points.in_order or (
            state is not None and (first < state[2] or (first == state[2] and state[0] < run_id))
        ):
            # out of order, or a rollback
            if points.reports is not None:
                in_place[(trial_id, group)] = points.reports
            else:
                assert reports_of is not None, "prepared reports need reports_of"
                in_place[(trial_id, group)] = [r for r in reports_of(trial_id) if r.group == group]
            continue
        series = points.series()
        if state is None:
            TAILS.forget(db, trial_id, group)
            low = level_min(last)
            works.append(Work(trial_id, group, low, series, points.size, {}))
            recorded.append(((trial_id, group), None, (run_id, first, last, low)))
            continue
        _, old_min, old_max, old_low = state
        low = max(old_low, level_min(last))
        after = (run_id, min(old_min, first), last, low)
        if low > old_low:
            promoted = (old_low, _take_all(connection, trial_id, group))
            works.append(Work(trial_id, group, low, series, points.size, {}, promoted))
            recorded.append(((trial_id, group), None, after))
            continue
        work = Work(trial_id, group, low, series, points.size, {})
        kept = TAILS.get(db, trial_id, group, state)
        for name in series:
            for level in (low + offset for offset in LEVELS):
                chunk = (old_max >> level) >> CHUNK_BITS
                tail = kept.get((name, level))
                if tail is not None and tail[0] == chunk:
                    work.continued[(name, level)] = (chunk, tail[1])
                else:
                    missing[(trial_id, group, name, level, chunk)] = work
        works.append(work)
        recorded.append(((trial_id, group), state, after))
    for key, columns in _stored_chunks(connection, list(missing)).items():
        missing[key].continued[(key[2], key[3])] = (key[4], columns)
    return TileUpdate(session, HELPERS.start(works), recorded, in_place, (runs, states))


def _update_in_place(
    session: Session,
    by_key: dict[tuple[int, str], list[MetricReport]],
    runs: dict[int, int],
    states: dict[tuple[int, str], State],
    db: str,
) -> None:
    """:func:`update_tiles` for trial groups whose reports are out of x order or roll back a
    newer run's range: merged into every stored chunk they touch, read back as needed."""
    connection = session.connection()
    new: dict[ChunkKey, Columns] = {}
    continued: list[ChunkKey] = []  # chunks that may be stored already
    stored: dict[ChunkKey, Columns] = {}
    state_rows: list[tuple[Any, ...]] = []
    befores: dict[tuple[int, str], State | None] = {}
    for (trial_id, group), reports in by_key.items():
        run_id = runs[trial_id]
        xs = list(map(int, map(_STEPS, reports)))
        avgs = list(map(_AVG, reports))
        x_min, x_max = min(xs), max(xs)
        state = states.get((trial_id, group))
        kept: Chunks = {}
        if state is None:
            low = level_min(x_max)
            old_max = None
            TAILS.forget(db, trial_id, group)
        else:
            old_run, old_min, old_max, old_low = state
            kept = TAILS.get(db, trial_id, group, state)
            low = max(old_low, level_min(max(old_max, x_max)))
            if low > old_low:
                _promote(connection, trial_id, group, old_low, low)
                kept, state = {}, None  # chunks rewritten: none of the kept ones carries over
            if old_run < run_id and xs[0] <= old_max:
                # A rollback: older runs' reports from this step on were just archived.
                top = low + COARSE
                start = (xs[0] >> top) << top
                _cut(connection, trial_id, group, low, start)
                kept, state = {}, None
                points = _raw_points(connection, trial_id, group, start) + [
                    p for p in zip(xs, avgs, strict=True) if p[0] < start
                ]
                xs, avgs = [x for x, _ in points], [values for _, values in points]
                x_max = max(xs)
                x_min = min(xs + ([old_min] if old_min < start else []))
            else:
                x_min, x_max = min(x_min, old_min), max(x_max, old_max)
        chunks = series_chunks(trial_id, group, tc.series_columns(xs, avgs), low)
        new.update(chunks)
        if old_max is not None:
            for key in chunks:
                if key[4] > (old_max >> key[3]) >> CHUNK_BITS:
                    continue  # beyond the stored range: a new chunk
                tail = kept.get((key[2], key[3]))
                if tail is not None and tail[0] == key[4]:
                    stored[key] = tail[1]  # never changed in place: merges build new lists
                else:
                    continued.append(key)
        befores[(trial_id, group)] = state
        state_rows.append((trial_id, group, run_id, x_min, x_max, low))
    stored.update(_stored_chunks(connection, continued))
    final = [
        (key, columns if key not in stored else tc.combine(stored[key], columns))
        for key, columns in new.items()
    ]
    written = write_chunks(connection, final)
    _upsert_states(connection, state_rows)
    tails: dict[tuple[int, str], Chunks] = collections.defaultdict(dict)
    for ((trial_id, group, metric, level, chunk), columns), row in zip(final, written, strict=True):
        last = tails[(trial_id, group)].get((metric, level))
        if last is None or last[0] < chunk:
            tails[(trial_id, group)][(metric, level)] = (chunk, columns, len(row[-1]))
    for trial_id, group, run_id, x_min, x_max, low in state_rows:
        TAILS.record_on_commit(
            session,
            (db, trial_id, group),
            befores[(trial_id, group)],
            (run_id, x_min, x_max, low),
            tails[(trial_id, group)],
        )


def backfill(connection: Connection) -> int:
    """Build from their unarchived raw rows the tiles of the trial groups that have such rows and
    no tiles (no ``metric_tile_series`` row): a database from before the tiles, upgraded by the
    migration that gives them their current layout. Returns how many trial groups it built."""
    pairs = connection.exec_driver_sql(
        paramstyle_sql(
            connection,
            "SELECT trial_id, metric_group, MAX(trial_run_id) FROM metrics m WHERE archived = ? "
            "AND NOT EXISTS (SELECT 1 FROM metric_tile_series s WHERE s.trial_id = m.trial_id "
            "AND s.metric_group = m.metric_group) "
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
    TAILS.forget(database_key(connection), trial_id, group)
    connection.exec_driver_sql(
        paramstyle_sql(
            connection, "DELETE FROM metric_tiles WHERE trial_id = ? AND metric_group = ?"
        ),
        (trial_id, group),
    )
    if not points:
        connection.exec_driver_sql(
            paramstyle_sql(
                connection,
                "DELETE FROM metric_tile_series WHERE trial_id = ? AND metric_group = ?",
            ),
            (trial_id, group),
        )
        return
    xs = [x for x, _ in points]
    low = level_min(max(xs))
    chunks = list(series_chunks(trial_id, group, tc.series_of(points), low).items())
    for part in in_parts(chunks, 500):
        write_chunks(connection, part)
    _upsert_states(connection, [(trial_id, group, run_id, min(xs), max(xs), low)])
