"""The metrics writer's kept chunks (``_core/_tile_tails``): recorded only when their transaction
commits, used only while the trial group's stored state is the one recorded, kept apart per
database, bounded in bytes; and the statement that reads chunks back when nothing is kept finds
them through the key's index (not a scan of ``metric_tiles``)."""

from __future__ import annotations

import pathlib
import sqlite3

import pytest
from db_rows import experiment_with_runs
from sqlalchemy import event

from determined.master._core import _metric_tiles
from determined.master._core._tile_tails import TileTails
from determined.master.db import Database

X: list[list[object]] = [[1], [1]]
Y: list[list[object]] = [[2], [1]]
Z: list[list[object]] = [[3], [1]]
STATE = (1, 1, 100, 1)
LATER = (1, 1, 120, 1)


@pytest.fixture
def db(tmp_path: pathlib.Path) -> Database:
    database = Database(f"sqlite:///{tmp_path}/tails.db")
    database.migrate()
    return database


def test_chunks_are_kept_once_committed_and_dropped_with_a_rollback(db: Database) -> None:
    tails = TileTails()
    with db.write() as session:
        tails.record_on_commit(session, ("a", 7, "training"), None, STATE, {("loss", 1): (3, X, 1)})
        assert tails.get("a", 7, "training", STATE) == {}  # not before the commit
    assert tails.get("a", 7, "training", STATE) == {("loss", 1): (3, X, 1)}
    with pytest.raises(RuntimeError), db.write() as session:
        tails.record_on_commit(
            session, ("a", 7, "training"), STATE, LATER, {("loss", 1): (4, Y, 1)}
        )
        raise RuntimeError("the transaction fails")
    assert tails.get("a", 7, "training", STATE) == {("loss", 1): (3, X, 1)}


def test_chunks_are_used_only_with_their_state_and_database(db: Database) -> None:
    tails = TileTails()
    with db.write() as session:
        tails.record_on_commit(session, ("a", 7, "training"), None, STATE, {("loss", 1): (3, X, 1)})
    assert tails.get("b", 7, "training", STATE) == {}  # another master's database
    assert tails.get("a", 7, "validation", STATE) == {}
    with db.write() as session:  # carried over: the state this transaction loaded is the kept one
        tails.record_on_commit(session, ("a", 7, "training"), STATE, LATER, {("acc", 1): (4, Z, 1)})
    assert tails.get("a", 7, "training", LATER) == {("loss", 1): (3, X, 1), ("acc", 1): (4, Z, 1)}
    with db.write() as session:  # not carried over: loaded a state it did not record
        tails.record_on_commit(session, ("a", 7, "training"), STATE, (2, 1, 5, 1), {})
    assert tails.get("a", 7, "training", (2, 1, 5, 1)) == {}
    with db.write() as session:
        tails.record_on_commit(session, ("a", 7, "training"), None, STATE, {("loss", 1): (3, X, 1)})
    assert tails.get("a", 7, "training", LATER) == {}  # the stored state moved on without us
    assert tails.get("a", 7, "training", STATE) == {}  # ... and the entry is gone


def test_a_lower_chunk_written_later_keeps_the_higher_one(db: Database) -> None:
    tails = TileTails()
    with db.write() as session:
        tails.record_on_commit(session, ("a", 7, "g"), None, STATE, {("m", 1): (5, X, 5)})
    with db.write() as session:
        tails.record_on_commit(session, ("a", 7, "g"), STATE, LATER, {("m", 1): (2, Y, 2)})
    assert tails.get("a", 7, "g", LATER) == {("m", 1): (5, X, 5)}


def test_least_recently_written_groups_go_beyond_the_byte_limit(db: Database) -> None:
    tails = TileTails(limit_bytes=250)
    with db.write() as session:
        for trial in range(5):
            tails.record_on_commit(session, ("a", trial, "g"), None, STATE, {("m", 1): (0, X, 100)})
    assert [t for t in range(5) if tails.get("a", t, "g", STATE)] == [3, 4]
    tails.forget("a", 4, "g")
    assert tails.get("a", 4, "g", STATE) == {}


def test_reading_chunks_back_uses_the_key_index(db: Database) -> None:
    _, (trial,) = experiment_with_runs(db, 1)
    seen: list[tuple[str, object]] = []

    def record(_c: object, _cur: object, statement: str, params: object, *_: object) -> None:
        if "FROM metric_tiles" in statement:
            seen.append((statement, params))

    event.listen(db.engine, "before_cursor_execute", record)
    try:
        with db.write() as session:
            keys = [(trial, "training", m, level, 0) for m in ("loss", "acc") for level in (1, 5)]
            assert _metric_tiles._stored_chunks(session.connection(), keys) == {}
    finally:
        event.remove(db.engine, "before_cursor_execute", record)
    assert seen
    with sqlite3.connect(db.url.split("///", 1)[1]) as connection:
        for statement, params in seen:
            plan = connection.execute(f"EXPLAIN QUERY PLAN {statement}", params).fetchall()
            details = [str(row[-1]) for row in plan]
            assert not any(d.startswith("SCAN metric_tiles") for d in details), details
