"""Ship an unmanaged run's stdout and stderr to its trial's logs on the master.

A process the master launched has its output collected by the master; an unmanaged one does not,
so while its context runs, what it prints still goes to the terminal and, in batches from a
background thread, to ``POST /api/v1/task/logs`` under the trial's task id (``det trial logs`` and
the web UI show it).
"""

from __future__ import annotations

import logging
import sys
import threading
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from determined.client import MasterClient

logger = logging.getLogger("determined.core")

SHIP_SECONDS = 1.0
MAX_LINES_PER_POST = 1000


class _Tee:
    """A text stream that writes through to ``original`` and hands complete lines to ``sink``."""

    def __init__(self, original: IO[str], sink: Any, stdtype: str) -> None:
        self._original = original
        self._sink = sink
        self._stdtype = stdtype
        self._partial = ""

    def write(self, data: str) -> int:
        written = self._original.write(data)
        text = self._partial + data
        *lines, self._partial = text.split("\n")
        for line in lines:
            self._sink(line, self._stdtype)
        return written

    def flush(self) -> None:
        self._original.flush()

    def finish(self) -> None:
        if self._partial:
            self._sink(self._partial, self._stdtype)
            self._partial = ""

    def __getattr__(self, name: str) -> Any:
        return getattr(self._original, name)


class OutputShipper:
    """Copies this process's stdout and stderr lines to the task logs of ``task_id``."""

    def __init__(self, client: MasterClient, task_id: str, rank: int) -> None:
        self._client = client
        self._task_id = task_id
        self._rank = rank
        self._pending: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._tees: list[tuple[str, _Tee, Any]] = []
        self._failed = False

    def start(self) -> None:
        """Begin copying output."""
        from determined.client import utc_now_iso

        self._now = utc_now_iso
        for name in ("stdout", "stderr"):
            original = getattr(sys, name)
            tee = _Tee(original, self._add, name)
            self._tees.append((name, tee, original))
            setattr(sys, name, tee)
        self._thread = threading.Thread(target=self._run, name="det-unmanaged-logs", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop copying and send what is left."""
        for name, tee, original in self._tees:
            tee.finish()
            if getattr(sys, name) is tee:
                setattr(sys, name, original)
        self._tees = []
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        self._ship()

    def flush(self) -> None:
        """Send the complete lines printed so far."""
        self._ship()

    def _add(self, line: str, stdtype: str) -> None:
        entry = {
            "taskId": self._task_id,
            "log": line + "\n",
            "timestamp": self._now(),
            "rankId": self._rank,
            "stdtype": stdtype,
            "source": "unmanaged",
        }
        with self._lock:
            self._pending.append(entry)

    def _run(self) -> None:
        while not self._stop.wait(SHIP_SECONDS):
            self._ship()

    def _ship(self) -> None:
        while True:
            with self._lock:
                batch, self._pending = (
                    self._pending[:MAX_LINES_PER_POST],
                    self._pending[MAX_LINES_PER_POST:],
                )
            if not batch:
                return
            try:
                self._client.post_task_logs(batch)
            except Exception as exc:
                if not self._failed:  # say it once; the output still reaches the terminal
                    self._failed = True
                    logger.warning("could not ship output to the master's task logs: %s", exc)
                return
