"""Ships metric reports from a background thread, in batches, so reporting costs the trainer ~nothing.

``report()`` only copies the dict and appends to a queue. The thread drains everything queued, sends it
as one batch, and remembers the first failure: it is raised from the next ``report()`` or from ``close()``,
so an error surfaces at the latest one call later. Order is preserved.

A trial reporting many times a second would otherwise send each report alone (the master acknowledges
faster than the next one comes), and a master serving many such trials spends its time on requests, not
rows. So the thread sends at most once per ``linger`` seconds: a report that comes sooner after the
last send waits for the ones that follow it. A trial reporting less often sees no delay, and a
validation report (what the searcher acts on), ``flush()`` and ``close()`` send at once.
"""

from __future__ import annotations

import datetime
import logging
import math
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, NamedTuple

logger = logging.getLogger("determined.core")


class MetricsReport(NamedTuple):
    group: str
    metrics: dict[str, Any]
    steps_completed: int | None
    batch_metrics: list[dict[str, Any]] | None
    report_time: float  # time.time() at report

    def report_time_iso(self) -> str:
        when = datetime.datetime.fromtimestamp(self.report_time, datetime.timezone.utc)
        return when.isoformat().replace("+00:00", "Z")


_CLOSE = object()


class MetricsShipper:
    """A background sender of metric reports.

    Args:
        send: called from the shipper thread with every batch of reports, in order.
        max_batch: the most reports sent in one call.
        max_pending: reports queued before ``report()`` waits for the thread to catch up.
        linger: the shortest time between two sends, unless something is urgent (see above).
    """

    def __init__(
        self,
        send: Callable[[list[MetricsReport]], None],
        *,
        max_batch: int = 500,
        max_pending: int = 100_000,
        linger: float = 0.5,
    ) -> None:
        self._send = send
        self._max_batch = max_batch
        self._max_pending = max_pending
        self._linger = linger
        self._urgent = 0
        """Reports up to this count (of ``_submitted``) must go now, linger or not: up to a
        validation report, a ``flush()``, ``close()`` or a full batch."""
        self._last_send = -math.inf
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._progress = threading.Condition()
        self._lock = threading.Lock()
        self._submitted = 0  # reports queued so far
        self._handled = 0  # reports sent (or dropped after a failure) so far
        self._closed = False

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name="det-metrics-shipper", daemon=True
            )
            self._thread.start()

    def report(
        self,
        group: str,
        metrics: dict[str, Any],
        steps_completed: int | None = None,
        batch_metrics: list[dict[str, Any]] | None = None,
    ) -> None:
        """Queue one report; raises the error of an earlier failed send, if any."""
        if self._error is not None:
            self._raise_error()
        if self._closed:
            raise RuntimeError("cannot report metrics after the core context was closed")
        if self._thread is None:
            self.start()
        with self._lock:
            self._submitted += 1
            self._queue.put(
                MetricsReport(group, dict(metrics), steps_completed, batch_metrics, time.time())
            )
        pending = self._submitted - self._handled
        if group == "validation" or pending >= self._max_batch:
            self._hurry(self._submitted)
        if pending > self._max_pending:
            self.flush()

    def flush(self, timeout: float | None = None) -> None:
        """Block until everything queued so far was sent (or failed); raise a pending error."""
        target = self._submitted
        self._hurry(target)
        with self._progress:
            self._progress.wait_for(lambda: self._handled >= target, timeout)
        if self._error is not None:
            self._raise_error()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            batch: list[MetricsReport] = []
            closing = item is _CLOSE
            if not closing:
                self._wait_for_company()
                batch.append(item)
            while len(batch) < self._max_batch:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is _CLOSE:
                    closing = True
                    break
                batch.append(item)
            if batch and self._error is None:
                try:
                    self._send(batch)
                except BaseException as exc:  # surfaces on the trainer's next call
                    logger.error("failed to report metrics: %s", exc)
                    self._error = exc
                # A full batch leaves more behind, which goes at once.
                self._last_send = time.monotonic() if len(batch) < self._max_batch else -math.inf
            with self._progress:
                self._handled += len(batch)
                self._progress.notify_all()
            if closing:
                return

    def _wait_for_company(self) -> None:
        """Hold a report that came within ``linger`` of the last send until that time is up (or
        something urgent comes), so the reports that follow it go in the same request."""
        wait = self._last_send + self._linger - time.monotonic()
        if wait > 0 and self._error is None:
            with self._progress:
                # The report held is number ``_handled + 1``: it goes once it is urgent.
                self._progress.wait_for(lambda: self._urgent > self._handled, wait)

    def _hurry(self, upto: int) -> None:
        """Send the reports up to number ``upto`` without waiting for the linger."""
        with self._progress:
            if upto > self._urgent:
                self._urgent = upto
                self._progress.notify_all()

    def _raise_error(self) -> None:
        error = self._error
        raise RuntimeError(f"an earlier metrics report failed: {error}") from error

    def close(self) -> None:
        """Send everything queued, stop the thread, and raise a pending error."""
        if self._closed:
            return
        self._closed = True
        if self._thread is not None:
            self._queue.put(_CLOSE)
            self._hurry(self._submitted)
            self._thread.join()
        if self._error is not None:
            self._raise_error()
