"""The metrics writer's bulk insert on SQLite: a request's reports go in by one ``json_each``
statement, lone reports by ``executemany``; both must store exactly the same rows, in order."""

from __future__ import annotations

import datetime
import sqlite3
from pathlib import Path
from typing import Any

import orjson
import pytest
from db_rows import experiment_with_runs

from determined.master._api._metric_reports import parse_report
from determined.master._core._metrics_writer import MetricsWriter
from determined.master._wire import APIError
from determined.master.db import Database, _metric_inserts
from determined.master.db._metric_inserts import STEPPED_ROWS, MetricRow, insert_metric_rows

UTC = datetime.timezone.utc

AWKWARD = [
    {"loss": 1e-05, "acc": 0.1 + 0.2, "big": 2**62, "neg": -3, "zero": 0.0, "negzero": -0.0},
    {"huge": 1.5e300, "tiny": 5e-324, "int": 123456789012345, "e": 2.718281828459045},
    {"text": 'a"b\\c\nd\te\u0000f \u2028 é 😀', "none": None, "yes": True, "no": False},
    {"nested": {"x": [1, {"y": []}, {}], "z": "w"}, "": 1, "k\u00e9y": -1.25},
    {},
]


def _rows(trial_ids: list[int]) -> list[MetricRow]:
    """A transaction as the writer builds it: runs of one request's reports (long and short),
    several trials and times, an archived row, batch metrics, a validation-style document."""
    t0 = datetime.datetime(2026, 11, 30, 12, 0, 0, 123456, tzinfo=UTC)
    t1 = t0 + datetime.timedelta(seconds=1)
    later = datetime.datetime(2026, 11, 30, 14, 0, 0)  # naive: UTC by the master's convention
    rows: list[MetricRow] = []

    def run(trial: int, start: int, count: int, when: datetime.datetime, **kw: Any) -> None:
        for step in range(start, start + count):
            values = AWKWARD[step % len(AWKWARD)]
            stored: dict[str, Any] = {"avg_metrics": values, "batch_metrics": []}
            if step % 7 == 0:
                stored["batch_metrics"] = [{"loss": 0.5}, {"loss": float(step)}]
            rows.append(
                (
                    trial,
                    1,
                    kw.get("group", "training"),
                    step,
                    when,
                    stored,
                    kw.get("archived", False),
                )
            )

    first, second = trial_ids
    run(first, 1, STEPPED_ROWS * 3, t0)  # one request's batch: one statement
    run(second, 1, 1, t0)  # a lone report between batches
    run(second, 2, STEPPED_ROWS - 1, t1)  # just under the threshold
    run(first, 100, STEPPED_ROWS, t1, group="custom")  # exactly at it, another group
    run(first, 200, STEPPED_ROWS + 2, later, archived=True)
    run(second, 300, STEPPED_ROWS + 5, t1)
    run(second, 400, 2, t1, group="validation")
    return rows


def _stored(db: Database) -> list[tuple[Any, ...]]:
    with db.engine.connect() as connection:
        return connection.exec_driver_sql(
            "SELECT id, trial_id, trial_run_id, metric_group, total_batches, end_time, metrics, "
            "archived, typeof(trial_run_id), typeof(total_batches), typeof(end_time), "
            "typeof(metrics), typeof(archived) FROM metrics ORDER BY id"
        ).fetchall()


def _insert(tmp_path: Path, name: str) -> list[tuple[Any, ...]]:
    db = Database(f"sqlite:///{tmp_path / name}.sqlite")
    try:
        db.migrate()
        _, trial_ids = experiment_with_runs(db, 2)
        with db.write() as session:
            insert_metric_rows(session.connection(), _rows(trial_ids))
        return _stored(db)
    finally:
        db.close()


def test_statement_per_request_stores_what_executemany_stores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Byte for byte the same rows, ids in the order given, as when every row goes through
    ``executemany`` (the path before the one-statement insert, and still the one for lone
    reports)."""
    stepped = _insert(tmp_path, "stepped")
    monkeypatch.setattr(_metric_inserts, "STEPPED_ROWS", 10**9)
    plain = _insert(tmp_path, "plain")
    assert stepped == plain
    expected = [
        (trial, run, group, steps, _utc_text(when), orjson.dumps(stored).decode(), int(archived))
        for trial, run, group, steps, when, stored, archived in _rows(_trial_ids(stepped))
    ]
    assert [row[1:8] for row in stepped] == expected  # in the order given: ids ascending
    assert {row[8:] for row in stepped} == {("integer", "integer", "text", "text", "integer")}


def _trial_ids(stored: list[tuple[Any, ...]]) -> list[int]:
    return list(dict.fromkeys(row[1] for row in stored))


def _utc_text(when: datetime.datetime) -> str:
    """How SQLAlchemy's ``DateTime`` stores a time on SQLite: naive UTC with microseconds."""
    if when.tzinfo is not None:
        when = when.astimezone(UTC).replace(tzinfo=None)
    return when.isoformat(" ", "microseconds")


def test_a_bad_row_in_a_request_stores_none_of_the_transaction(tmp_path: Path) -> None:
    """A run of rows for a trial without a run row breaks the foreign key: the statement fails
    and the transaction stores nothing (the writer then stores each request alone)."""
    db = Database(f"sqlite:///{tmp_path / 'fk'}.sqlite")
    try:
        db.migrate()
        _, (trial,) = experiment_with_runs(db, 1)
        now = datetime.datetime.now(UTC)
        good = [(trial, 1, "training", s, now, {"avg_metrics": {}}, False) for s in range(20)]
        bad = [(trial + 99, 1, "training", s, now, {"avg_metrics": {}}, False) for s in range(20)]
        with pytest.raises(Exception, match="FOREIGN KEY"), db.write() as session:
            insert_metric_rows(session.connection(), good + bad)
        assert _stored(db) == []
    finally:
        db.close()


@pytest.mark.parametrize(
    "reports", [1, STEPPED_ROWS * 4], ids=["lone report", "one request's batch"]
)
def test_a_database_locked_by_another_process_is_a_503(tmp_path: Path, reports: int) -> None:
    """Another connection holds the file (``BEGIN EXCLUSIVE``, as a backup or a second master
    might): the writer's insert waits the busy timeout and the request gets a 503 naming the lock,
    so the trial retries; not a 500 from a DBAPI error the master does not recognise."""
    path = tmp_path / "locked.sqlite"
    db = Database(f"sqlite:///{path}", busy_timeout_s=0.2)
    try:
        db.migrate()
        _, (trial,) = experiment_with_runs(db, 1)
        writer = MetricsWriter(db.write, lambda *args: None)
        body = {"avgMetrics": {"loss": 0.5}}
        batch = [
            parse_report("training", {"trialRunId": 1, "stepsCompleted": s, "metrics": body})
            for s in range(1, reports + 1)
        ]
        locker = sqlite3.connect(path, isolation_level=None)
        try:
            locker.execute("BEGIN EXCLUSIVE")
            with pytest.raises(APIError) as refused:
                writer.write(trial, batch)
            locker.execute("ROLLBACK")
            assert refused.value.status == 503, refused.value.message
            assert "database is locked" in refused.value.message
            writer.write(trial, batch)  # the lock gone, the same reports go in
        finally:
            locker.close()
            writer.close()
        assert len(_stored(db)) == reports
    finally:
        db.close()
