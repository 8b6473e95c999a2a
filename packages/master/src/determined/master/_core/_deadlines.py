"""Callbacks at a time, on one thread: the master's preemption timeouts.

A ``threading.Timer`` per preempted allocation started a thread for every trial a search stops
(nearly every trial of an ASHA search), and its cancellation at the trial's exit woke that thread to
end it. Here one thread waits for the earliest deadline; a cancelled deadline is only marked, and
dropped when it comes up.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable

logger = logging.getLogger("determined.master")


class Deadline:
    """A callback due at a time (``time.monotonic()``); :meth:`cancel` before it is due stops it."""

    __slots__ = ("cancelled", "fn", "seq", "when")

    def __init__(self, when: float, seq: int, fn: Callable[[], None]) -> None:
        self.when = when
        self.seq = seq
        self.fn = fn
        self.cancelled = False

    def cancel(self) -> None:
        """Do not run the callback (no effect once it ran)."""
        self.cancelled = True

    def __lt__(self, other: Deadline) -> bool:
        return (self.when, self.seq) < (other.when, other.seq)


class Deadlines:
    """Runs callbacks after a delay on one daemon thread, started at the first :meth:`later`."""

    def __init__(self, name: str = "det-master-deadlines") -> None:
        self._name = name
        self._heap: list[Deadline] = []
        self._cond = threading.Condition()
        self._seq = itertools.count()
        self._thread: threading.Thread | None = None
        self._stopped = threading.Event()
        """The running thread's own stop signal (a thread that :meth:`stop` let go sees only its
        own, never a newer thread's)."""

    def later(self, delay: float, fn: Callable[[], None]) -> Deadline:
        """Run ``fn`` in ``delay`` seconds (unless the returned deadline is cancelled)."""
        deadline = Deadline(time.monotonic() + delay, next(self._seq), fn)
        with self._cond:
            heapq.heappush(self._heap, deadline)
            if self._thread is None:
                self._stopped = stopped = threading.Event()
                self._thread = threading.Thread(
                    target=self._run, args=(stopped,), name=self._name, daemon=True
                )
                self._thread.start()
            elif self._heap[0] is deadline:
                self._cond.notify()  # earlier than what the thread waits for
        return deadline

    def stop(self) -> None:
        """Drop every pending callback and end the thread (a later :meth:`later` starts another)."""
        with self._cond:
            self._stopped.set()
            for deadline in self._heap:
                deadline.cancelled = True
            self._heap.clear()
            self._cond.notify_all()
            thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)

    def _run(self, stopped: threading.Event) -> None:
        while True:
            with self._cond:
                due = self._next_due(stopped)
                if due is None:
                    return
            try:
                due.fn()
            except Exception:
                logger.exception("master: a timed callback failed")

    def _next_due(self, stopped: threading.Event) -> Deadline | None:
        """Wait (holding the condition) for the next callback that is due; None once stopped."""
        while not stopped.is_set():
            while self._heap and self._heap[0].cancelled:
                heapq.heappop(self._heap)
            if not self._heap:
                self._cond.wait()
                continue
            wait = self._heap[0].when - time.monotonic()
            if wait <= 0:
                return heapq.heappop(self._heap)
            self._cond.wait(wait)
        return None
