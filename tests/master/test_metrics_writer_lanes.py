"""The metrics writer's lanes on a real PostgreSQL: overlapping transactions that lose, duplicate and
reorder nothing.

No master: a real ``MetricsWriter`` with two lanes over a migrated database (the master's own
``Database.write``/``concurrent_write``), one experiment and a few runs. An outside connection holds
row locks to stop one lane's transaction at a known statement while the test watches the other.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy
from db_rows import experiment_with_runs
from postgres_db import drop_database, postgres_url

from determined.master._api._metric_reports import parse_reports
from determined.master._core import _metric_series
from determined.master._core._experiment_deletion import delete_experiment
from determined.master._core._metrics_writer import MetricsWriter
from determined.master._wire import APIError
from determined.master.db import Database, Experiment, Metric, Run, User

pytestmark = pytest.mark.postgres


def _reports(trial: int, steps: range, group: str = "training", run_id: int = 1) -> list[Any]:
    key = "validationMetrics" if group == "validation" else "avgMetrics"
    return parse_reports(
        [
            (
                group,
                {
                    "trialId": trial,
                    "trialRunId": run_id,
                    "stepsCompleted": s,
                    "metrics": {key: {"loss": 1.0 / s}},
                },
            )
            for s in steps
        ]
    )


@pytest.fixture()
def db() -> Iterator[Database]:
    url = postgres_url()
    database = Database(url)
    database.migrate()
    yield database
    database.close()
    drop_database(url)


def _writer(db: Database, heard: list[tuple[int, int]] | None = None) -> MetricsWriter:
    def on_validation(session: Any, run: Run, rows: list[Metric]) -> None:
        if heard is not None:
            heard.extend((run.id, row.total_batches) for row in rows)

    return MetricsWriter(db.write, on_validation, concurrent=db.concurrent_write, lanes=2)


def _rows(db: Database, group: str = "") -> list[tuple[int, int, int, bool]]:
    """``(id, trial, steps, archived)`` of every stored report (of ``group``), by id."""
    where = "WHERE metric_group = :g" if group else ""
    with db.engine.connect() as connection:
        rows = connection.execute(
            sqlalchemy.text(
                f"SELECT id, trial_id, total_batches, archived FROM metrics {where} ORDER BY id"
            ),
            {"g": group},
        ).all()
    return [(int(i), int(t), int(s), bool(a)) for i, t, s, a in rows]


def _in_thread(fn: Any, *args: Any) -> tuple[threading.Thread, list[BaseException]]:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            fn(*args)
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, errors


def _blocked_backends(db: Database, holder: int) -> list[int]:
    with db.engine.connect() as connection:
        return [
            int(p)
            for (p,) in connection.execute(
                sqlalchemy.text(
                    "SELECT pid FROM pg_stat_activity WHERE :h = ANY(pg_blocking_pids(pid))"
                ),
                {"h": holder},
            )
        ]


def _stored_meanwhile(writer: MetricsWriter, trial: int, steps: range, waited: str) -> None:
    """``trial``'s reports of ``steps`` are stored (the write returns) while another lane is stuck."""
    thread, errors = _in_thread(writer.write, trial, _reports(trial, steps))
    thread.join(60)
    assert not thread.is_alive(), waited
    assert not errors, errors


def _wait_until(condition: Any, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def test_one_lane_goes_on_while_another_waits_on_the_server(db: Database) -> None:
    _, (a, b) = experiment_with_runs(db, 2)
    assert a % 2 != b % 2  # consecutive ids: one trial per lane
    writer = _writer(db)
    try:
        writer.write(a, _reports(a, range(1, 11)))  # a's tile state row exists now
        with db.engine.connect() as holder:
            holder_pid = holder.execute(sqlalchemy.text("SELECT pg_backend_pid()")).scalar()
            _lock_tiles(holder, a)
            thread, errors = _in_thread(writer.write, a, _reports(a, range(11, 21)))
            _wait_until(lambda: _blocked_backends(db, holder_pid), "a's lane to wait on the lock")
            # b's lane commits while a's transaction is stuck on the server.
            _stored_meanwhile(writer, b, range(1, 11), "b's reports waited behind a's stuck lane")
            assert thread.is_alive()
            assert [s for _, t, s, _ in _rows(db) if t == b] == list(range(1, 11))
            holder.rollback()
        thread.join(60)
        assert not errors, errors
    finally:
        writer.close()
    rows = _rows(db)
    assert [s for _, t, s, _ in rows if t == a] == list(range(1, 21))
    # a's second request took its ids after b's: ids are visible in the order they were taken.
    assert max(i for i, t, _, _ in rows if t == b) < min(
        i for i, t, s, _ in rows if t == a and s > 10
    )


def _lock_tiles(holder: Any, trial: int) -> None:
    holder.execute(
        sqlalchemy.text("SELECT 1 FROM metric_tile_series WHERE trial_id = :t FOR UPDATE"),
        {"t": trial},
    )


def test_a_small_request_passes_home_lanes_stuck_on_large_ones_and_no_trial_is_reordered(
    db: Database,
) -> None:
    """The express lane: with both home lanes stuck in a large request each, a small request of an
    idle trial is stored at once; a small request of a trial whose large one is stuck waits for it
    (same lane) and is stored after it."""
    _, (a, b, c) = experiment_with_runs(db, 3)
    writer = _writer(db)
    try:
        for trial in (a, b, c):
            writer.write(trial, _reports(trial, range(1, 11)))  # their tile state rows exist now
        with db.engine.connect() as holder:
            holder_pid = holder.execute(sqlalchemy.text("SELECT pg_backend_pid()")).scalar()
            _lock_tiles(holder, a)
            _lock_tiles(holder, b)
            stuck = [
                _in_thread(writer.write, trial, _reports(trial, range(11, 61))) for trial in (a, b)
            ]
            _wait_until(lambda: len(_blocked_backends(db, holder_pid)) == 2, "both home lanes")
            after, after_errors = _in_thread(writer.write, a, _reports(a, range(61, 63)))
            _wait_until(lambda: writer.pending() == 1, "a's small request to queue")
            _stored_meanwhile(
                writer, c, range(11, 13), "c's small request waited behind the stuck lanes"
            )
            assert [s for _, t, s, _ in _rows(db) if t == c] == list(range(1, 13))
            assert after.is_alive(), "a's small request passed a's own stuck request"
            assert all(thread.is_alive() for thread, _ in stuck)
            holder.rollback()
        for thread, errors in [*stuck, (after, after_errors)]:
            thread.join(60)
            assert not errors, errors
        assert writer.pending() == 0
    finally:
        writer.close()
    rows = _rows(db)
    assert [s for _, t, s, _ in rows if t == a] == list(range(1, 63))
    assert [s for _, t, s, _ in rows if t == b] == list(range(1, 61))


def test_concurrent_trials_store_every_report_once_and_a_follower_by_id_misses_none(
    db: Database,
) -> None:
    exp, trials = experiment_with_runs(db, 6)
    writer = _writer(db)
    requests = 12
    done = threading.Event()
    seen: set[int] = set()

    def follow() -> None:
        # What the experiment's metric streams do: read reports with ids above the newest seen.
        after = 0
        while True:
            last = done.is_set()
            with db.read() as session:
                for report_id, *_ in _metric_series._new_reports(session, exp, "training", after):
                    seen.add(report_id)
                    after = max(after, report_id)
            if last:
                return

    def report(trial: int) -> None:
        for k in range(requests):
            size = 300 if k % 3 == 0 else 7
            start = 1 + sum(300 if j % 3 == 0 else 7 for j in range(k))
            writer.write(trial, _reports(trial, range(start, start + size)))
            if k % 4 == 3:  # now and then a validation: that trial's transaction is exclusive
                writer.write(trial, _reports(trial, range(start, start + 1), "validation"))

    follower, follow_errors = _in_thread(follow)
    reporters = [_in_thread(report, trial) for trial in trials]
    try:
        for thread, errors in reporters:
            thread.join(120)
            assert not errors, errors
    finally:
        done.set()
        follower.join(60)
        writer.close()
    assert not follow_errors, follow_errors
    total = sum(300 if k % 3 == 0 else 7 for k in range(requests))
    rows = _rows(db)
    validations = {i for i, *_ in _rows(db, "validation")}
    for trial in trials:
        assert [s for i, t, s, _ in rows if t == trial and i not in validations] == list(
            range(1, total + 1)
        )
    assert len(validations) == len(trials) * (requests // 4)
    assert seen == {i for i, *_ in rows} - validations  # the follower skipped no row
    with db.read() as session:
        for run in session.scalars(sqlalchemy.select(Run).where(Run.id.in_(trials))):
            assert run.total_batches == total
            assert run.summary_metrics["training"]["loss"]["count"] == total


def test_a_lane_stuck_in_its_insert_holds_up_no_other_lane_and_followers_skip_none_of_its_rows(
    db: Database,
) -> None:
    """Lanes insert and commit in any order (``_metric_horizon``): while a's lane waits inside its
    insert (an outside transaction holds, uncommitted, the id a's first row takes), b's request is
    stored and acknowledged; a follower reading by id meanwhile gets none of b's new rows (their
    ids lie above a's uncommitted ones), and once a commits it reads all of both."""
    exp, (a, b) = experiment_with_runs(db, 2)
    writer = _writer(db)

    def follow(after: int) -> list[tuple[int, int, int]]:
        with db.read() as session:
            reports = _metric_series._new_reports(session, exp, "training", after)
        return [(int(i), int(t), int(s)) for i, t, s, _ in reports]

    try:
        writer.write(a, _reports(a, range(1, 11)))
        writer.write(b, _reports(b, range(1, 11)))
        followed = follow(0)
        assert len(followed) == 20
        after = followed[-1][0]
        with db.engine.connect() as holder:
            holder_pid = holder.execute(sqlalchemy.text("SELECT pg_backend_pid()")).scalar()
            holder.execute(
                sqlalchemy.text(
                    "INSERT INTO metrics (id, trial_id, trial_run_id, metric_group, total_batches,"
                    " end_time, metrics, archived) SELECT last_value + 1, :t, 1, 'held', 0, now(),"
                    " '{}', false FROM metrics_id_seq"
                ),
                {"t": a},
            )
            stuck, errors = _in_thread(writer.write, a, _reports(a, range(11, 31)))
            _wait_until(lambda: _blocked_backends(db, holder_pid), "a's insert to wait on its id")
            _stored_meanwhile(writer, b, range(11, 21), "b's request waited for a's insert")
            assert [s for _, t, s, _ in _rows(db) if t == b] == list(range(1, 21))
            assert stuck.is_alive()
            assert follow(after) == []  # b's new rows wait for a's below them
            holder.rollback()
        stuck.join(60)
        assert not errors, errors
    finally:
        writer.close()
    late = follow(after)
    assert sorted((t, s) for _, t, s in late) == [(a, s) for s in range(11, 31)] + [
        (b, s) for s in range(11, 21)
    ]
    assert follow(late[-1][0]) == []


def test_validations_rollbacks_and_locked_runs_take_the_exclusive_transaction(
    db: Database,
) -> None:
    _, (a, b, c) = experiment_with_runs(db, 3)
    heard: list[tuple[int, int]] = []
    writer = _writer(db, heard)
    try:
        writer.write(a, _reports(a, range(1, 21)))
        writer.write(a, _reports(a, range(10, 11), "validation"))
        assert heard == [(a, 10)]  # the searcher's callback heard it, in the transaction
        # a restarts from a checkpoint at step 10: its first report of run 2 archives run 1's
        # reports from step 11 on.
        with db.write() as session:
            session.get(Run, a).run_id = 2  # type: ignore[union-attr]
        writer.write(a, _reports(a, range(11, 16), run_id=2))
        writer.write(a, _reports(a, range(16, 18), run_id=2))
        # b's run row is locked by another transaction: b's lane skips it (never waiting on a
        # row lock while holding others), then stores it exclusively once the lock is gone.
        with db.engine.connect() as holder:
            holder_pid = holder.execute(sqlalchemy.text("SELECT pg_backend_pid()")).scalar()
            holder.execute(sqlalchemy.text("SELECT 1 FROM runs WHERE id = :r FOR UPDATE"), {"r": b})
            thread, errors = _in_thread(writer.write, b, _reports(b, range(1, 6)))
            _wait_until(lambda: _blocked_backends(db, holder_pid), "b's update to wait")
            holder.rollback()
        thread.join(60)
        assert not errors, errors
        writer.write(c, _reports(c, range(1, 4)))
    finally:
        writer.close()
    rows = _rows(db)
    live_a = [s for _, t, s, archived in rows if t == a and not archived]
    assert live_a == [*range(1, 11), 10, *range(11, 18)]
    assert [s for _, t, s, archived in rows if t == a and archived] == list(range(11, 21))
    assert [s for _, t, s, _ in rows if t == b] == list(range(1, 6))
    assert [s for _, t, s, _ in rows if t == c] == list(range(1, 4))


def test_metric_rows_hold_no_foreign_key_and_still_never_outlive_their_run(db: Database) -> None:
    """Migration 0015 drops the metrics -> runs foreign key on PostgreSQL (half of COPY's cost): a
    report for a missing trial is still refused with nothing stored, and deleting the experiment
    still removes its rows."""
    with db.engine.connect() as connection:
        keys = connection.execute(
            sqlalchemy.text(
                "SELECT conname FROM pg_constraint WHERE contype = 'f' "
                "AND conrelid = 'metrics'::regclass"
            )
        ).all()
    assert keys == []
    exp, (a, b) = experiment_with_runs(db, 2)
    writer = _writer(db)
    try:
        writer.write(a, _reports(a, range(1, 6)))
        writer.write(b, _reports(b, range(1, 4)))
        with pytest.raises(APIError) as missing:
            writer.write(b + 1000, _reports(b + 1000, range(1, 3)))
        assert missing.value.status == 404
        assert [t for _, t, _, _ in _rows(db)] == [a] * 5 + [b] * 3
    finally:
        writer.close()
    with db.write() as session:
        session.execute(sqlalchemy.update(Experiment).values(state="COMPLETED"))
        admin = User(username="deleter", admin=True)
        session.add(admin)
        session.flush()
        requester = User(id=admin.id, username="deleter", admin=True)  # outlives the session
    delete_experiment(db, exp, requester)
    assert _rows(db) == []
    with db.engine.connect() as connection:
        tiles = connection.execute(sqlalchemy.text("SELECT count(*) FROM metric_tiles")).scalar()
    assert tiles == 0
