"""Large metric requests prepared by a helper process (``_core._prepared``) store exactly what the
writer's own parser stores: the raw rows, the runs' summaries and the chart tiles, on SQLite and
PostgreSQL. The same requests go through a writer that parses everything and one whose helpers
prepare what waits behind a transaction; then the two databases are compared. The requests cover
what the prepared path must get right: ints and floats, booleans and nulls, metrics missing from
some reports, a request that is not plain (parsed, so its trial's prepared requests are parsed
too), a wrong run id (the same 400) and a restarted run reporting earlier steps (archived rows,
tiles merged in place from the bodies parsed again).
"""

from __future__ import annotations

import datetime
import functools
import threading
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from db_rows import experiment_with_runs
from sqlalchemy import select, text, update

from determined.master._api._metric_reports import batch_size, parse_batch
from determined.master._api._plain_reports import prepare_batch
from determined.master._core import (
    _metric_requests,
    _metrics,
    _metrics_writer,
    _prepared,
    _writer_helpers,
)
from determined.master._core._metric_requests import Deferred
from determined.master._core._metrics_writer import MetricsWriter
from determined.master._wire import APIError
from determined.master.db import Database, Metric, Run
from determined.master.db._metric_inserts import prepared_form

NOW = datetime.datetime(2026, 12, 1, 3, 0, tzinfo=datetime.timezone.utc)


def _body(run_id: int, steps: range, values: Any, group: str = "training") -> bytes:
    reports = [
        {
            "group": group,
            "metrics": {
                "trialRunId": run_id,
                "stepsCompleted": step,
                "metrics": {"avgMetrics": values(step)},
            },
        }
        for step in steps
    ]
    return orjson.dumps({"reports": reports})


def _floats(step: int) -> dict[str, Any]:
    return {"loss": 1.0 / (step + 1), "count": step * 3, "lr": 0.1}


def _mixed(step: int) -> dict[str, Any]:
    values: dict[str, Any] = {"loss": step / 7}
    if step % 3:
        values["acc"] = step % 5 == 0 if step % 2 else None  # booleans and nulls
    if step % 4 == 0:
        values["extra"] = step  # a metric some reports lack
    return values


def _labelled(step: int) -> dict[str, Any]:
    return {"loss": step / 3, "phase": "warmup"}  # a string: not a plain batch


def _requests(trials: list[int]) -> dict[int, list[tuple[bytes, int]]]:
    """Per trial, its requests in order: ``(body, run id of the run at that point)``."""
    a, b, c, d = trials
    return {
        a: [(_body(1, range(i * 100, (i + 1) * 100), _floats), 1) for i in range(6)],
        b: [(_body(1, range(i * 80, (i + 1) * 80), _mixed), 1) for i in range(5)],
        c: [
            (_body(1, range(0, 90), _floats), 1),
            (_body(1, range(90, 180), _labelled), 1),
            (_body(1, range(180, 300), _floats), 1),
        ],
        d: [
            (_body(1, range(0, 400), _floats), 1),
            (_body(1, range(400, 500), _floats), 1),
            (_body(7, range(500, 600), _floats), 1),  # not its run: a 400
            # restarted from step 250: run 2 reports 250.. again (a rollback)
            (_body(2, range(250, 350), _floats), 2),
            (_body(2, range(350, 450), _floats), 2),
        ],
    }


def _deferred(raw: bytes) -> Deferred:
    return Deferred(
        batch_size(raw), lambda: parse_batch(raw, NOW), functools.partial(prepare_batch, raw, NOW)
    )


def _store(db: Database, form: str | None, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Every trial's requests from a thread of its own (so that several wait at once); returns
    the errors per request and how many requests were stored prepared."""
    monkeypatch.setattr(_metrics_writer, "MAX_REPORTS_PER_COMMIT", 150)  # a request or two each
    prepared = [0]
    ingest = _metrics.ingest_prepared

    def counting(session: Any, run: Any, parts: list[Any], **kwargs: Any) -> None:
        prepared[0] += len(parts)
        ingest(session, run, parts, **kwargs)

    monkeypatch.setattr(_metrics, "ingest_prepared", counting)
    _, trials = experiment_with_runs(db, 4)
    requests = _requests(trials)
    gate = threading.Event()

    def transaction() -> Any:
        gate.wait(60)  # the first transaction waits until every trial has a request queued
        return db.write()

    writer = MetricsWriter(transaction, lambda *args: None, form=form)
    errors: dict[tuple[int, int], str] = {}

    def report(index: int, trial: int) -> None:
        for number, (raw, run_id) in enumerate(requests[trial]):
            if run_id > 1:
                with db.write() as session:  # the trial was restarted
                    session.execute(update(Run).where(Run.id == trial).values(run_id=run_id))
            try:
                writer.write(trial, _deferred(raw))
            except APIError as exc:
                errors[(index, number)] = f"{exc.status} {exc}"

    threads = [
        threading.Thread(target=report, args=(index, trial)) for index, trial in enumerate(trials)
    ]
    for thread in threads:
        thread.start()
    _wait_queued(writer, len(trials))
    gate.set()
    for thread in threads:
        thread.join(120)
    writer.close()
    return {"errors": errors, "prepared": prepared[0], "stored": _contents(db)}


def _wait_queued(writer: MetricsWriter, count: int) -> None:
    deadline = threading.Event()
    for _ in range(6000):
        if writer.pending() >= count - 1:  # the first one is in the held transaction
            return
        deadline.wait(0.01)
    raise AssertionError("the trials' requests never queued")


def _contents(db: Database) -> dict[str, Any]:
    with db.read() as session:
        rows = sorted(
            (
                m.trial_id,
                m.group,
                m.trial_run_id,
                m.total_batches,
                m.archived,
                m.end_time,
                m.metrics,
            )
            for m in session.scalars(select(Metric))
        )
        summaries = {
            run.id: (run.summary_metrics, run.total_batches, run.last_activity is not None)
            for run in session.scalars(select(Run))
        }
        tiles = sorted(tuple(r) for r in session.execute(text("SELECT * FROM metric_tiles")))
        series = sorted(tuple(r) for r in session.execute(text("SELECT * FROM metric_tile_series")))
    return {"rows": rows, "summaries": summaries, "tiles": tiles, "series": series}


@pytest.fixture
def two_databases(db_url: str, tmp_path: Any) -> Iterator[tuple[Database, Database]]:
    """``db_url`` and a second database of the same kind."""
    if db_url.startswith("sqlite"):
        other_url = f"sqlite:///{tmp_path / 'other.sqlite'}"
        cleanup = None
    else:
        from postgres_db import drop_database, postgres_url

        other_url = postgres_url()
        cleanup = functools.partial(drop_database, other_url)
    dbs = (Database(db_url), Database(other_url))
    try:
        for db in dbs:
            db.migrate()
        yield dbs
    finally:
        for db in dbs:
            db.close()
        if cleanup is not None:
            cleanup()


def test_prepared_requests_store_what_parsed_ones_store(
    two_databases: tuple[Database, Database], monkeypatch: pytest.MonkeyPatch
) -> None:
    parsed_db, prepared_db = two_databases
    form = prepared_form(prepared_db.engine.dialect)
    assert form is not None
    parsed = _store(parsed_db, None, monkeypatch)
    prepared = _store(prepared_db, form, monkeypatch)
    assert parsed["prepared"] == 0
    assert prepared["prepared"] >= 8, "the helpers prepared too few requests to compare"
    assert prepared["errors"] == parsed["errors"]
    assert list(parsed["errors"].values()) == ["400 invalid run id, 7 (reported) != 1 (expected)"]
    for part in ("rows", "summaries", "tiles", "series"):
        assert prepared["stored"][part] == parsed["stored"][part], part
    archived = [row for row in prepared["stored"]["rows"] if row[4]]
    assert len(archived) == 250  # run 1's steps 250..499, superseded by run 2


def test_a_plain_batch_is_prepared_and_others_are_left_to_the_parser() -> None:
    plain = _body(1, range(0, 100), _mixed)
    prepared = prepare_batch(plain, NOW, 5, "sqlite")
    assert prepared is not None
    assert (prepared.trial_id, prepared.group, prepared.run_id, prepared.size) == (
        5,
        "training",
        1,
        100,
    )
    assert (prepared.first_step, prepared.last_step, prepared.in_order) == (0, 99, True)
    assert prepared.columns["loss"].typecode == "d"  # numbers: one array for the summary
    assert isinstance(prepared.columns["acc"], list)  # booleans and nulls: value by value
    for raw in (
        _body(1, range(0, 100), _labelled),  # a string value
        _body(1, range(0, 100), _floats, group="validation"),  # the searcher's group
        _body(1, range(0, 1), _floats),  # a single report
        b'{"reports": [{"group": "training", "metrics": {"avgMetrics": {"x": NaN}}}]}',
        b"not json",
    ):
        assert prepare_batch(raw, NOW, 5, "sqlite") is None


def test_requests_are_parsed_when_no_helper_starts(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Helpers that cannot start cost the writer its preparation, nothing else."""
    helpers = _writer_helpers.WriterHelpers()
    monkeypatch.setattr(_metric_requests, "HELPERS", helpers)
    monkeypatch.setattr(_writer_helpers.sys, "executable", "/nonexistent/python")
    db = Database(sqlite_url)
    try:
        db.migrate()
        stored = _store(db, "sqlite", monkeypatch)
    finally:
        db.close()
    assert stored["prepared"] == 0
    assert helpers.failures > 0
    assert list(stored["errors"].values()) == ["400 invalid run id, 7 (reported) != 1 (expected)"]
    rows = stored["stored"]["rows"]
    assert len(rows) == 600 + 400 + 300 + 500 + 200  # every request but the refused one
    assert sum(1 for row in rows if row[4]) == 250


def test_a_request_the_helper_cannot_prepare_is_left_to_the_parser(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """An error while preparing one request (here: a form no insert knows) costs that request its
    preparation only, with the traceback on stderr."""
    plain = _body(1, range(0, 100), _floats)
    assert _prepared.call(functools.partial(prepare_batch, plain, NOW), 5, "sqlite") is not None
    assert _prepared.call(functools.partial(prepare_batch, plain, NOW), 5, "oracle") is None
    assert "no prepared form for 'oracle'" in capfd.readouterr().err
