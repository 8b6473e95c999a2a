"""The metrics writer's transactions on a real database (SQLite and PostgreSQL): which waiting
requests go together, in what order, and that each is stored exactly once.

No master: a real ``MetricsWriter`` over a migrated database with one experiment and a few runs. The
test holds the lock the writer's transaction takes, so requests pile up in a known order, then lets
go and reads the ``metrics`` table's ids (insertion order).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

import sqlalchemy
from db_rows import experiment_with_runs
from sqlalchemy.orm import Session

from determined.master._api._metric_reports import parse_reports
from determined.master._core._metrics_writer import MAX_REPORTS_PER_COMMIT, MetricsWriter
from determined.master.db import Database


def _reports(trial: int, steps: range) -> list[Any]:
    return parse_reports(
        [
            (
                "training",
                {
                    "trialId": trial,
                    "trialRunId": 1,
                    "stepsCompleted": s,
                    "metrics": {"avgMetrics": {"loss": 1.0 / s}},
                },
            )
            for s in steps
        ]
    )


def test_small_requests_jump_ahead_but_never_reorder_a_trial(db_url: str) -> None:
    db = Database(db_url)
    db.migrate()
    _, (a, b, c, d) = experiment_with_runs(db, 4, username="writer-test")

    gate = threading.Lock()

    @contextlib.contextmanager
    def transaction() -> Iterator[Session]:
        with gate, db.write() as session:
            yield session

    writer = MetricsWriter(transaction, lambda session, run, rows: None)
    big = MAX_REPORTS_PER_COMMIT * 3 // 4
    errors: list[BaseException] = []
    threads: list[threading.Thread] = []

    def write(trial: int, steps: range) -> None:
        try:
            writer.write(trial, _reports(trial, steps))
        except BaseException as exc:
            errors.append(exc)

    def send(trial: int, steps: range, queued: int) -> None:
        thread = threading.Thread(target=write, args=(trial, steps))
        thread.start()
        threads.append(thread)
        deadline = time.monotonic() + 30
        while writer.pending() < queued:  # wait for the request to be queued
            assert time.monotonic() < deadline, "request not queued"
            time.sleep(0.001)

    try:
        with gate:
            send(d, range(1, 2), 0)  # taken at once: the writer then waits on the gate
            deadline = time.monotonic() + 30
            while writer.pending():
                assert time.monotonic() < deadline
                time.sleep(0.001)
            send(a, range(1, big + 1), 1)
            send(b, range(1, big + 1), 2)
            send(c, range(1, 2), 3)  # small, no large request of its trial ahead
            send(a, range(big + 1, big + 2), 4)  # small, but behind a's large one
        for thread in threads:
            thread.join(60)
        assert not errors, errors
    finally:
        writer.close()

    with db.engine.connect() as connection:
        rows = connection.execute(
            sqlalchemy.text("SELECT trial_id, total_batches FROM metrics ORDER BY id")
        ).all()
    db.close()
    order = [(int(t), int(s)) for t, s in rows]
    assert len(order) == len(set(order)) == 1 + big + big + 1 + 1  # each report exactly once
    first = {trial: order.index(next(p for p in order if p[0] == trial)) for trial in (a, b, c, d)}
    # d was in flight; then c's small request alone; then a's large and small ones; then b's
    assert first[d] < first[c] < first[a] < first[b]
    assert [s for t, s in order if t == a] == list(range(1, big + 2))  # a's order kept
    assert [s for t, s in order if t == b] == list(range(1, big + 1))
