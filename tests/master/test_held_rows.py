"""``_held_rows``: an UPDATE written without loading rows keeps the session's copies honest; UPDATEs
written at the commit go together, after the transaction's ORM changes."""

from __future__ import annotations

import datetime
import pathlib

import pytest
from sqlalchemy import bindparam, event, update

from determined.master._core._held_rows import held, update_unloaded, write_at_commit
from determined.master.db import Database, Task

_END = update(Task).where(Task.task_id == bindparam("tid")).values(end_time=bindparam("ended"))
WHEN = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)


def _database(tmp_path: pathlib.Path) -> Database:
    db = Database(f"sqlite:///{tmp_path / 'det.db'}")
    db.migrate()
    with db.write() as session:
        session.add_all([Task(task_id="a", job_id="j"), Task(task_id="b", job_id="j")])
    return db


def test_a_held_copy_reads_the_update_and_its_pending_change_is_kept(
    tmp_path: pathlib.Path,
) -> None:
    db = _database(tmp_path)
    with db.write() as session:
        a, b = session.get(Task, "a"), session.get(Task, "b")
        assert a is not None and b is not None
        a.job_id = "changed before the update"  # pending: an expire without a flush drops it
        update_unloaded(session, _END, {"tid": "a", "ended": WHEN}, Task, task_id="a")
        assert a.end_time is not None and a.end_time.replace(tzinfo=None) == WHEN.replace(
            tzinfo=None
        )
        assert a.job_id == "changed before the update"
        assert "job_id" in vars(b)  # another row's copy is left loaded
    with db.read() as session:
        stored = session.get(Task, "a")
        assert stored is not None and stored.job_id == "changed before the update"
        assert stored.end_time is not None


def test_held_finds_only_a_loaded_match(tmp_path: pathlib.Path) -> None:
    db = _database(tmp_path)
    with db.write() as session:
        assert held(session, Task, task_id="a") is None  # nothing loaded: no SELECT made
        a = session.get(Task, "a")
        assert held(session, Task, task_id="a") is a
        assert held(session, Task, task_id="a", job_id="other") is None
        session.expire(a)
        assert held(session, Task, task_id="a", job_id="j") is None  # not loaded: no match


def test_updates_at_the_commit_are_one_statement_after_the_orm_changes(
    tmp_path: pathlib.Path,
) -> None:
    db = _database(tmp_path)
    many: list[bool] = []

    def seen(_c: object, _cur: object, statement: str, _p: object, _x: object, em: bool) -> None:
        if statement.startswith("UPDATE tasks SET end_time"):
            many.append(em)

    event.listen(db.engine, "before_cursor_execute", seen)
    with db.write() as session:
        session.add(Task(task_id="c", job_id="j"))  # pending: flushed before the UPDATE
        for tid in ("a", "b", "c"):
            write_at_commit(session, _END, {"tid": tid, "ended": WHEN})
        assert many == []  # nothing written before the commit
    assert many == [True]
    with db.read() as session:
        assert all(session.get(Task, t).end_time is not None for t in "abc")  # type: ignore[union-attr]


def test_updates_at_the_commit_of_a_rolled_back_transaction_are_dropped(
    tmp_path: pathlib.Path,
) -> None:
    db = _database(tmp_path)
    with pytest.raises(RuntimeError), db.write() as session:
        write_at_commit(session, _END, {"tid": "a", "ended": WHEN})
        raise RuntimeError("rolled back")
    with db.write() as session:
        pass  # a later transaction of the same database writes nothing of it
    with db.read() as session:
        task = session.get(Task, "a")
        assert task is not None and task.end_time is None
