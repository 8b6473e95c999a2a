"""The master's one thread of timed callbacks (preemption timeouts): order, cancellation, stop."""

from __future__ import annotations

import threading

from determined.master._core._deadlines import Deadlines

WAIT_S = 10.0


def test_callbacks_run_in_deadline_order_on_one_thread() -> None:
    deadlines = Deadlines()
    ran: list[tuple[str, str]] = []
    done = threading.Event()
    gate = threading.Event()

    def note(name: str) -> None:
        ran.append((name, threading.current_thread().name))
        if len(ran) == 3:
            done.set()

    try:
        deadlines.later(0.0, lambda: gate.wait(WAIT_S))  # holds the thread while we schedule
        scheduled = {
            "last": deadlines.later(0.3, lambda: note("last")),
            "middle": deadlines.later(0.2, lambda: note("middle")),
            "first": deadlines.later(0.0, lambda: note("first")),
        }
        gate.set()
        assert done.wait(WAIT_S)
        by_time = sorted(scheduled, key=lambda n: (scheduled[n].when, scheduled[n].seq))
        assert [name for name, _ in ran] == by_time
        assert {thread for _, thread in ran} == {"det-master-deadlines"}
    finally:
        deadlines.stop()


def test_an_earlier_deadline_wakes_the_thread_waiting_for_a_later_one() -> None:
    deadlines = Deadlines()
    done = threading.Event()
    try:
        deadlines.later(3600, lambda: None)
        deadlines.later(0.0, done.set)
        assert done.wait(WAIT_S)
    finally:
        deadlines.stop()


def test_a_cancelled_callback_never_runs_and_a_failing_one_does_not_stop_the_rest() -> None:
    deadlines = Deadlines()
    ran: list[str] = []
    done = threading.Event()
    gate = threading.Event()

    def fail() -> None:
        ran.append("failed")
        raise RuntimeError("boom")

    try:
        deadlines.later(0.0, lambda: gate.wait(WAIT_S))  # nothing runs before the cancel
        deadlines.later(0.0, lambda: ran.append("cancelled")).cancel()
        deadlines.later(0.0, fail)
        deadlines.later(0.0, lambda: (ran.append("after"), done.set()))
        gate.set()
        assert done.wait(WAIT_S)
        assert ran == ["failed", "after"]
    finally:
        deadlines.stop()


def test_stop_drops_what_is_pending_and_a_later_call_starts_again() -> None:
    deadlines = Deadlines()
    ran: list[str] = []
    pending = deadlines.later(3600, lambda: ran.append("dropped"))
    thread = deadlines._thread
    assert thread is not None and thread.is_alive()
    deadlines.stop()
    assert pending.cancelled
    assert not thread.is_alive()
    done = threading.Event()
    try:
        deadlines.later(0.0, done.set)
        assert done.wait(WAIT_S)
        assert ran == []
    finally:
        deadlines.stop()
