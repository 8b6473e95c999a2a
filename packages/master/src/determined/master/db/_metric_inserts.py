"""Many metric rows in one statement: the hot insert of the metrics writer, per database.

SQLAlchemy's per-row parameter processing (JSON serialisation, datetime binding, cache keys) costs
more than the database's own work, so each dialect gets its cheapest bulk path, fed values already
in the storage format:

- SQLite: a request's reports (rows sharing trial, run, group and time) in one ``INSERT ...
  SELECT`` over ``json_each`` of a single JSON parameter, the rest by the DBAPI's ``executemany``
  of one prepared INSERT (JSON text, naive UTC ``YYYY-MM-DD HH:MM:SS.ffffff`` as SQLAlchemy's
  ``DateTime`` stores it). Why not ``executemany`` for all: Python's sqlite3 releases the GIL
  around each row's step and must win it back before the next row, so while the HTTP thread parses
  a request the writer waits for the GIL once per row; one statement steps once, and its C work
  runs beside the HTTP thread on another core (benchmarks/RESULTS.md, "Ingestion: where the
  master's one core goes");
- PostgreSQL (psycopg 3): ``COPY metrics (...) FROM STDIN`` in text format, the rows written as one
  buffer in the open transaction, so a batch costs one round trip and no per-row statement;
- anything else: SQLAlchemy Core's ``executemany``.

Rows are :data:`MetricRow` tuples; the PostgreSQL path also offers :func:`upsert_rows` (many-row
``INSERT ... ON CONFLICT`` in one statement) for other per-batch tables.

Every path inserts inside the caller's transaction: nothing is visible before its commit.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import groupby
from operator import itemgetter
from typing import Any

import orjson
from sqlalchemy import insert
from sqlalchemy.engine import Connection

from determined.master._core._prepared import Prepared
from determined.master._metric_text import MetricRow as MetricRow
from determined.master._metric_text import aware, copy_buffer, naive_utc, steps_and_metrics_json
from determined.master.db._models import Metric

COLUMNS = "trial_id, trial_run_id, metric_group, total_batches, end_time, metrics, archived"

FEW_METRIC_ROWS = 8
"""Metric rows that go in by one ``INSERT ... VALUES`` on PostgreSQL instead of COPY: one round
trip instead of two, which a trial's lone report waits for under load. Not more: a statement of
~30 rows (a transaction of one-report requests) cost the server more than their COPY (the
one-report baseline of ``benchmarks/bench_metrics_ingest.py`` lost ~10 % of its rows/s)."""

STEPPED_ROWS = 16
"""Rows sharing trial, run, group and time from which SQLite gets them in one ``json_each``
statement; fewer go through ``executemany`` (a statement per lone report costs more than its
step)."""

_SQLITE_ROW = f"INSERT INTO metrics ({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)"
_SQLITE_RUN = (
    f"INSERT INTO metrics ({COLUMNS}) SELECT ?, ?, ?, json_extract(value, '$[0]'), ?, "
    "json_extract(value, '$[1]'), ? FROM json_each(?) ORDER BY key"
)
"""A run of rows sharing trial, run, group, time and archived flag: ``[steps, metrics]`` each.
``json_extract`` gives an object back as the same text ``orjson`` wrote (checked by
tests/master/test_metric_inserts.py), so the stored JSON does not depend on the path."""


def _insert_sqlite(connection: Connection, rows: list[MetricRow]) -> None:
    """``rows`` in order: runs of :data:`STEPPED_ROWS` or more rows sharing everything but steps
    and metrics by one :data:`_SQLITE_RUN` each, the others by ``executemany``. Through
    SQLAlchemy's connection, not the DBAPI cursor: its errors come wrapped (a locked file is
    SQLAlchemy's ``OperationalError``, which the master answers with a 503)."""
    dumps = orjson.dumps
    singles: list[tuple[Any, ...]] = []
    for (end_time, trial_id, group, run_id, archived), grouped in groupby(rows, _RUN_KEY):
        run = list(grouped)
        time_text = naive_utc(end_time)
        if len(run) < STEPPED_ROWS:
            singles.extend(
                (t, r, g, s, time_text, dumps(m).decode(), int(a)) for t, r, g, s, _, m, a in run
            )
            continue
        if singles:
            connection.exec_driver_sql(_SQLITE_ROW, singles)
            singles = []
        connection.exec_driver_sql(
            _SQLITE_RUN,
            (trial_id, run_id, group, time_text, int(archived), steps_and_metrics_json(run)),
        )
    if singles:
        connection.exec_driver_sql(_SQLITE_ROW, singles)


_RUN_KEY = itemgetter(4, 0, 2, 1, 6)


def insert_metric_rows(connection: Connection, rows: Sequence[MetricRow | Prepared]) -> None:
    """Insert ``rows`` in ``connection``'s transaction, in order: metric rows, and requests a
    helper prepared in this database's form (``_core._prepared``: SQLite and psycopg only)."""
    if not rows:
        return
    dialect = connection.dialect
    if dialect.name == "sqlite":
        for prepared, run in groupby(rows, _is_prepared):
            if not prepared:
                _insert_sqlite(connection, list(run))  # type: ignore[arg-type]
                continue
            for part in run:
                assert isinstance(part, Prepared)
                connection.exec_driver_sql(
                    _SQLITE_RUN,
                    (part.trial_id, part.run_id, part.group, naive_utc(part.now), 0, part.payload),
                )
        return
    if dialect.name == "postgresql" and dialect.driver == "psycopg":
        if len(rows) <= FEW_METRIC_ROWS and not any(map(_is_prepared, rows)):
            dumps = orjson.dumps
            marks = ", ".join(["(%s, %s, %s, %s, %s, %s, %s)"] * len(rows))
            plain: list[MetricRow] = rows  # type: ignore[assignment]
            connection.exec_driver_sql(
                f"INSERT INTO metrics ({COLUMNS}) VALUES {marks}",
                tuple(
                    value
                    for t, r, g, s, e, m, a in plain
                    for value in (t, r, g, s, aware(e), dumps(m).decode(), a)
                ),
            )
            return
        buffer = b"".join(
            b"".join(part.payload for part in run)  # type: ignore[union-attr, misc]
            if prepared
            else copy_buffer(list(run))  # type: ignore[arg-type]
            for prepared, run in groupby(rows, _is_prepared)
        )
        raw = connection.connection.driver_connection
        with (
            raw.cursor() as cursor,  # type: ignore[union-attr]
            cursor.copy(f"COPY metrics ({COLUMNS}) FROM STDIN") as copy,
        ):
            copy.write(buffer)
        return
    if any(map(_is_prepared, rows)):
        raise ValueError(f"no prepared metric rows on {dialect.name} (see prepared_form)")
    names = [name.strip() for name in COLUMNS.split(",")]
    connection.execute(
        insert(Metric.__table__),  # type: ignore[arg-type]
        [dict(zip(names, row, strict=True)) for row in rows],
    )


def prepared_form(dialect: Any) -> str | None:
    """The form ``_core._prepared`` prepares requests in for this SQLAlchemy dialect, or None
    when its inserts take only metric rows."""
    if dialect.name == "sqlite":
        return "sqlite"
    if dialect.name == "postgresql" and dialect.driver == "psycopg":
        return "postgresql"
    return None


def _is_prepared(row: Any) -> bool:
    return type(row) is Prepared


FEW_ROWS = 32
"""Rows that :func:`upsert_rows` writes with one ``INSERT ... VALUES`` on PostgreSQL (more go
through a staging table)."""


def upsert_rows(
    connection: Connection,
    table: str,
    columns: tuple[str, ...],
    rows: list[tuple[Any, ...]],
    conflict: str = "",
    key: int = 0,
) -> None:
    """``INSERT INTO {table} ({columns}) VALUES ... {conflict}`` for many rows in the open
    transaction, e.g. ``conflict="ON CONFLICT (a, b) DO UPDATE SET n = t.n + excluded.n"``.

    PostgreSQL: the rows are COPYed into a temporary staging table (created once per connection,
    emptied at commit), then one ``INSERT ... SELECT`` applies them, so the server plans one
    statement instead of one per row (psycopg's ``executemany``); several times faster for
    thousands of rows. Up to :data:`FEW_ROWS` rows go in one multi-row ``INSERT ... VALUES``
    instead: one round trip, not the staging's four (a trial's one report writes a few rows, and
    under load each round trip waits for a core). Elsewhere: the DBAPI's ``executemany`` (SQLite's
    is a C loop over one prepared statement).

    ``key``: with an ``ON CONFLICT ... DO UPDATE``, how many leading columns form the conflict key.
    PostgreSQL refuses a statement that updates one row twice, so rows repeating a key are applied
    by separate statements, in order.
    """
    if not rows:
        return
    names = ", ".join(columns)
    if connection.dialect.name != "postgresql" or connection.dialect.driver != "psycopg":
        mark = "?" if connection.dialect.paramstyle == "qmark" else "%s"
        marks = ", ".join([mark] * len(columns))
        connection.exec_driver_sql(
            f"INSERT INTO {table} ({names}) VALUES ({marks}) {conflict}", rows
        )
        return
    if len(rows) <= FEW_ROWS and not key:
        row_marks = "(" + ", ".join(["%s"] * len(columns)) + ")"
        connection.exec_driver_sql(
            f"INSERT INTO {table} ({names}) VALUES {', '.join([row_marks] * len(rows))} {conflict}",
            tuple(value for row in rows for value in row),
        )
        return
    stage = f"det_stage_{table}"
    # Every time: a rolled-back transaction takes the temporary table with it.
    connection.exec_driver_sql(
        f"CREATE TEMPORARY TABLE IF NOT EXISTS {stage} "
        f"(LIKE {table} INCLUDING DEFAULTS) ON COMMIT DELETE ROWS"
    )
    raw = connection.connection.driver_connection
    for part in _without_repeated_keys(rows, key):
        with (
            raw.cursor() as cursor,  # type: ignore[union-attr]
            cursor.copy(f"COPY {stage} ({names}) FROM STDIN") as copy,
        ):
            for row in part:
                copy.write_row(row)
        connection.exec_driver_sql(
            f"INSERT INTO {table} ({names}) SELECT {names} FROM {stage} {conflict}"
        )
        connection.exec_driver_sql(f"DELETE FROM {stage}")


def _without_repeated_keys(rows: list[tuple[Any, ...]], key: int) -> list[list[tuple[Any, ...]]]:
    """``rows`` split into consecutive runs in which no key (first ``key`` columns) repeats."""
    if not key:
        return [rows]
    parts: list[list[tuple[Any, ...]]] = [[]]
    seen: set[tuple[Any, ...]] = set()
    for row in rows:
        k = row[:key]
        if k in seen:
            parts.append([])
            seen = set()
        seen.add(k)
        parts[-1].append(row)
    return parts
