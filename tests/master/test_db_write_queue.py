"""On SQLite a write queued behind this master's other writers waits at most the busy timeout.

The master serialises its SQLite writers behind one in-process lock. When another process locks
the file, each writer ahead in that queue waits out the busy timeout in turn; without a bound on
the queue a request would wait their sum (6 s behind two trials' reports with a 2 s timeout, over
10 s on a loaded machine) instead of getting its 503 after the timeout.
"""

from __future__ import annotations

import pathlib
import threading

import pytest
from sqlalchemy import exc as sa_exc
from sqlalchemy import text

from determined.master._core._db_errors import unavailable
from determined.master.db import Database


def test_a_write_behind_a_stuck_writer_is_refused_as_locked(tmp_path: pathlib.Path) -> None:
    db = Database(f"sqlite:///{tmp_path / 'det.sqlite'}", busy_timeout_s=0.2)
    holding = threading.Event()
    queued_answered = threading.Event()

    def stuck_writer() -> None:  # stands for a writer waiting on a file another process locked
        with db.write() as session:
            session.execute(text("SELECT 1"))
            holding.set()
            queued_answered.wait(10)

    holder = threading.Thread(target=stuck_writer)
    holder.start()
    try:
        assert holding.wait(10)
        with pytest.raises(sa_exc.OperationalError) as refused, db.write() as session:
            session.execute(text("SELECT 1"))
        queued_answered.set()
        outage = unavailable(refused.value)
        assert outage is not None and outage.status == 503
        assert "database is locked" in outage.message
    finally:
        queued_answered.set()
        holder.join()
    with db.write() as session:  # the queue is free again
        assert session.execute(text("SELECT 1")).scalar() == 1
    db.close()


def test_nested_writes_of_one_thread_still_enter(tmp_path: pathlib.Path) -> None:
    db = Database(f"sqlite:///{tmp_path / 'det.sqlite'}", busy_timeout_s=0.2)
    with db.write() as outer, db.write() as inner:
        assert (
            outer.execute(text("SELECT 1")).scalar() == inner.execute(text("SELECT 2")).scalar() - 1
        )
    db.close()


def test_a_drivers_own_operational_error_is_an_outage() -> None:
    """PostgreSQL's COPY goes to psycopg directly, so a server that goes away mid-COPY raises
    psycopg's ``OperationalError``, not SQLAlchemy's: still a 503 (the trial retries), not a 500."""
    import sqlite3

    psycopg = pytest.importorskip("psycopg")
    for error in (
        sqlite3.OperationalError("database is locked"),
        psycopg.OperationalError("consuming input failed: server closed the connection"),
    ):
        outage = unavailable(error)
        assert outage is not None and outage.status == 503, error
        assert str(error) in outage.message
    assert unavailable(ValueError("not the database")) is None
    assert unavailable(sqlite3.IntegrityError("UNIQUE constraint failed")) is None
