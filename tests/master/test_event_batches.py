"""Trial launches and exits queued together are handled in one lifecycle transaction each; a failed
batch is undone in memory and each exit handled again alone, so one bad exit does not take the
others with it."""

from __future__ import annotations

import pathlib
import threading
from typing import Any

import pytest
from master.conftest import Client, wait_for
from master.gate_trials import WAIT_AT_GATE, gate_config, three_waiting_trials
from sqlalchemy import event

from determined.master._core._transactions import Transactions
from determined.master.db import Database


class _Hold:
    """Passed to the events thread's barrier: its ``set`` blocks the thread until released."""

    def __init__(self) -> None:
        self.holding = threading.Event()
        self.release = threading.Event()

    def set(self) -> None:
        self.holding.set()
        self.release.wait(120)


def _hold(events: Any) -> _Hold:
    """Block the events thread, once it has handled what is queued, until the hold is released."""
    hold = _Hold()
    events._queue.put(("_barrier", (hold,)))
    wait_for(hold.holding.is_set, 30, "the events thread to hold")
    return hold


def _exit_together(master: Any, tmp_path: pathlib.Path) -> None:
    """Hold the events thread, let the trials exit, and release it once all three exits queue."""
    events = master.manager.events
    events.wait_idle()
    hold = _hold(events)
    (tmp_path / "go").touch()
    wait_for(lambda: events._queue.qsize() >= 3, 60, "the three exits to queue")
    hold.release.set()


def test_exits_queued_together_share_one_transaction(
    sqlite_master: Any, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    client, exp_id, _ = three_waiting_trials(sqlite_master, tmp_path, "exit-batch")
    events = sqlite_master.manager.events
    batches: list[int] = []
    handle = events._exited_all
    monkeypatch.setattr(
        events, "_exited_all", lambda exits: (batches.append(len(exits)), handle(exits))
    )
    statements: list[str] = []

    def seen(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if threading.current_thread().name == "det-master-events":
            statements.append(" ".join(statement.split()))

    event.listen(sqlite_master.db.engine, "before_cursor_execute", seen)
    try:
        _exit_together(sqlite_master, tmp_path)
        client.wait_state(exp_id, "STATE_COMPLETED")
    finally:
        event.remove(sqlite_master.db.engine, "before_cursor_execute", seen)
    assert batches == [3]
    assert [t["state"] for t in client.trials(exp_id)] == ["STATE_COMPLETED"] * 3
    # the three trials and their experiment read by one SELECT; their allocations' and tasks'
    # ends written by one statement each (write_at_commit)
    trial_reads = [
        s for s in statements if s.startswith("SELECT runs.") and "JOIN experiments" in s
    ]
    assert len(trial_reads) == 1, statements
    ended = [
        s
        for s in statements
        if s.startswith(("UPDATE allocations SET state=?, end_time", "UPDATE tasks SET end_time"))
    ]
    assert len(ended) == 2, statements


def test_assignments_queued_together_are_claimed_in_one_transaction(
    sqlite_master: Any, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events = sqlite_master.manager.events
    hold = _hold(events)
    batches: list[int] = []
    launches = events.launches
    claim_all = launches.assigned
    monkeypatch.setattr(
        launches, "assigned", lambda items: (batches.append(len(items)), claim_all(items))
    )
    client = Client(sqlite_master.url).login()
    config = gate_config("launch-batch", tmp_path)
    (tmp_path / "go").touch()
    exp_id = client.create(config, {"gate.py": WAIT_AT_GATE})
    wait_for(lambda: events._queue.qsize() >= 3, 60, "the three assignments to queue")
    hold.release.set()
    client.wait_state(exp_id, "STATE_COMPLETED")
    assert batches[0] == 3, batches
    assert len(list(tmp_path.glob("ready-*"))) == 3
    logs = client.all_logs(exp_id)
    assert logs.count("New trial runner in (container") == 3, logs


def test_one_failed_launch_does_not_stop_the_others_of_its_batch(
    sqlite_master: Any, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events = sqlite_master.manager.events
    hold = _hold(events)
    rm = sqlite_master.manager.events.launches._rm
    launch = rm.launch
    failed: list[str] = []

    def first_fails(spec: Any) -> None:
        if not failed:
            failed.append(spec.allocation_id)
            raise RuntimeError("injected launch failure")
        launch(spec)

    monkeypatch.setattr(rm, "launch", first_fails)
    client = Client(sqlite_master.url).login()
    config = gate_config("launch-failure", tmp_path)
    client.create(config, {"gate.py": WAIT_AT_GATE})
    wait_for(lambda: events._queue.qsize() >= 3, 60, "the three assignments to queue")
    hold.release.set()
    wait_for(lambda: len(list(tmp_path.glob("ready-*"))) == 2, 120, "the two other trials to run")
    logs = "\n".join(r["message"] for r in sqlite_master.log_buffer)
    assert f"launching {failed[0]} failed" in logs and "injected launch failure" in logs
    (tmp_path / "go").touch()


def test_a_failed_batch_is_undone_and_each_exit_handled_alone(
    sqlite_master: Any, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    client, exp_id, trial_ids = three_waiting_trials(sqlite_master, tmp_path, "exit-batch")
    manager = sqlite_master.manager
    bad = trial_ids[1]
    bad_alloc = manager.allocations.live(bad)
    assert bad_alloc is not None
    exits = manager.trial_exits
    move_on = exits.trial_exited

    def failing(session: Any, exp: Any, run: Any, alloc: Any, failed: bool) -> None:
        if run.id == bad:
            raise RuntimeError("injected failure of one exit")
        move_on(session, exp, run, alloc, failed)

    monkeypatch.setattr(exits, "trial_exited", failing)
    _exit_together(sqlite_master, tmp_path)
    completed = {t for t in trial_ids if t != bad}
    wait_for(
        lambda: (
            {t["id"] for t in client.trials(exp_id) if t["state"] == "STATE_COMPLETED"} == completed
        ),
        60,
        "the two good exits to be handled",
        lambda: str(client.trials(exp_id)),
    )
    manager.events.wait_idle()
    # the failed exit left the master's memory as before it: the allocation is live again
    assert manager.allocations.get(bad_alloc.allocation_id) is bad_alloc
    assert not bad_alloc.exited
    assert client.experiment(exp_id)["state"] == "STATE_RUNNING"
    logs = "\n".join(r["message"] for r in sqlite_master.log_buffer)
    assert "a batch of 3 failed" in logs and "injected failure" in logs

    monkeypatch.setattr(exits, "trial_exited", move_on)
    manager.events.allocation_exited(bad_alloc.allocation_id, 0, None)  # handled again: now fine
    client.wait_state(exp_id, "STATE_COMPLETED")
    assert [t["state"] for t in client.trials(exp_id)] == ["STATE_COMPLETED"] * 3


def test_undos_run_newest_first_only_when_the_transaction_fails(tmp_path: pathlib.Path) -> None:
    db = Database(f"sqlite:///{tmp_path / 'det.sqlite'}")
    db.migrate()
    transactions = Transactions(db)
    done: list[str] = []
    with transactions.txn():
        transactions.undo(lambda: done.append("committed"))
    assert done == []
    with pytest.raises(RuntimeError), transactions.txn():
        transactions.undo(lambda: done.append("first"))
        with transactions.txn():  # a nested transaction that committed is not undone
            transactions.undo(lambda: done.append("nested, committed"))
        transactions.undo(lambda: done.append("second"))
        transactions.effect(lambda: done.append("effect"))
        raise RuntimeError("fails")
    assert done == ["second", "first"]
    db.close()
