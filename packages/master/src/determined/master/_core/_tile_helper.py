"""Helper processes that build chart tile chunks for the metrics writer (``_tile_build.build``).

The master's threads share one interpreter lock, and at high ingestion rates the writer's chart
tile arithmetic (a third of its time per row) is time the HTTP thread cannot parse the next
requests in. A large batch's :class:`~determined.master._core._tile_build.Work` is therefore sent
to a helper process, and the writer waits on the pipe without holding the lock. The helper is a
pure function server: the writer reads and writes the database, in its own transaction, as before.

A helper is started on first use (``python -m determined.master._core._tile_helper``, a few
light imports), serves one writer thread at a time, and exits when its pipe closes (the master
stopped, or was killed). Any failure of a helper (it died, a broken pipe) loses nothing: the
batch is built in the writer's thread instead, and the next large batch starts a new helper.
"""

from __future__ import annotations

import atexit
import logging
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

from determined.master._core._tile_build import Built, Work, build

logger = logging.getLogger("determined.master")

MIN_ROWS = 256
"""A batch of fewer reports is built in the writer's thread: the round trip and the copies would
cost more than they free (a single report's acknowledgement waits on its transaction)."""

MAX_FAILURES_IN_A_ROW = 5
"""After this many helpers failed with no success between, the process builds every batch in the
writer (a helper that cannot start at all, e.g. an interpreter that cannot run ``-m``, would
otherwise be started, and fail, once per large batch)."""
TIMEOUT_S = 60.0
"""How long the writer waits for a helper's answer before it stops the helper and builds the batch
itself (a batch takes the helper well under a second: a helper this slow is stuck)."""

_HEADER = struct.Struct(">Q")


def _send(fd: int, value: Any) -> None:
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    for part in (_HEADER.pack(len(data)), data):
        left = memoryview(part)
        while left:
            left = left[os.write(fd, left) :]


def _read(fd: int, size: int, deadline: float | None) -> bytes:
    """``size`` bytes from pipe ``fd``, waiting until ``deadline`` (``time.monotonic()``) at most."""
    parts: list[bytes] = []
    while size:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError(f"the tile helper did not answer within {TIMEOUT_S:g} s")
        part = os.read(fd, min(size, 1 << 20))
        if not part:
            raise EOFError("the tile helper's pipe closed")
        parts.append(part)
        size -= len(part)
    return b"".join(parts)


def _receive(fd: int, deadline: float | None = None) -> Any:
    (size,) = _HEADER.unpack(_read(fd, _HEADER.size, deadline))
    return pickle.loads(_read(fd, size, deadline))


class _Helper:
    """One helper process and its pipes."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", __name__],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            bufsize=0,
        )

    def send(self, works: Sequence[Work]) -> None:
        assert self.process.stdin is not None
        _send(self.process.stdin.fileno(), list(works))

    def receive(self) -> list[Built]:
        assert self.process.stdout is not None
        status, value = _receive(self.process.stdout.fileno(), time.monotonic() + TIMEOUT_S)
        if status != "ok":
            raise RuntimeError(f"the tile helper failed:\n{value}")
        return value  # type: ignore[no-any-return]

    def kill(self) -> None:
        """Stop it now, whatever it is doing."""
        self.process.kill()
        self.close()

    def close(self) -> None:
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class Building:
    """A batch's chunks being built: :meth:`result` waits for them (in a helper, the writer's
    thread meanwhile stores the batch's raw rows), :meth:`abandon` drops them (a failed
    transaction)."""

    def __init__(self, owner: TileHelpers, works: Sequence[Work], helper: _Helper | None) -> None:
        self._owner = owner
        self._works = works
        self._helper = helper

    def result(self) -> list[Built]:
        helper, self._helper = self._helper, None
        if helper is None:
            return [build(work) for work in self._works]
        try:
            built = helper.receive()
        except Exception as exc:
            self._owner.lost(helper, exc)
            return [build(work) for work in self._works]
        self._owner.idle(helper)
        return built

    def abandon(self) -> None:
        helper, self._helper = self._helper, None
        if helper is not None:  # its answer would be read by the next batch: stop it instead
            helper.kill()


class TileHelpers:
    """Idle helper processes, one taken per large batch (the writer's lanes may build at once)."""

    def __init__(self) -> None:
        self._idle: list[_Helper] = []
        self._lock = threading.Lock()
        self.failures = 0
        """Helpers lost to an error so far (tests and logs)."""
        self._failed_in_a_row = 0

    def start(self, works: Sequence[Work]) -> Building:
        """Start building ``works``: in a helper process when the batch is large."""
        if (
            sum(work.size for work in works) < MIN_ROWS
            or self._failed_in_a_row >= MAX_FAILURES_IN_A_ROW
        ):
            return Building(self, works, None)
        helper = self._take_idle()
        try:
            if helper is None:
                helper = _Helper()
            helper.send(works)
        except Exception as exc:
            if helper is not None:
                self.lost(helper, exc)
            else:
                self._failed(f"starting the chart tile helper failed: {exc}")
            return Building(self, works, None)
        return Building(self, works, helper)

    def _take_idle(self) -> _Helper | None:
        """An idle helper that is still running; those that died while idle are dropped."""
        while True:
            with self._lock:
                helper = self._idle.pop() if self._idle else None
            if helper is None or helper.process.poll() is None:
                return helper
            self.lost(helper, RuntimeError(f"it exited while idle ({helper.process.returncode})"))

    def idle(self, helper: _Helper) -> None:
        """A helper that answered: kept for the next batch."""
        with self._lock:
            self._idle.append(helper)
            self._failed_in_a_row = 0

    def lost(self, helper: _Helper, exc: BaseException) -> None:
        """A helper that failed (it died, a broken pipe): stopped; the batch is built here."""
        self._failed(f"the chart tile helper failed ({exc}); building in the writer")
        helper.kill()

    def _failed(self, message: str) -> None:
        with self._lock:
            self.failures += 1
            self._failed_in_a_row += 1
            given_up = self._failed_in_a_row == MAX_FAILURES_IN_A_ROW
        logger.warning("master: %s", message)
        if given_up:
            logger.error(
                "master: %d chart tile helpers failed in a row; this master builds every batch's"
                " tiles in its metrics writer from now on",
                MAX_FAILURES_IN_A_ROW,
            )

    def close(self) -> None:
        """Stop the idle helpers (one in use stops when its pipe closes with the process)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for helper in idle:
            helper.close()

    def pids(self) -> list[int]:
        """The idle helpers' process ids (tests)."""
        with self._lock:
            return [helper.process.pid for helper in self._idle]


HELPERS = TileHelpers()
"""The process's helpers (stateless: masters in one process, as in tests, share them)."""
atexit.register(HELPERS.close)


def _serve(source: int, sink: int) -> None:
    """The helper's loop: build each request's works until the pipe closes."""
    import traceback

    while True:
        try:
            works = _receive(source)
        except EOFError:
            return
        try:
            reply: tuple[str, Any] = ("ok", [build(work) for work in works])
        except Exception:
            reply = ("error", traceback.format_exc())
        _send(sink, reply)


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the master's Ctrl-C is the master's to handle
    answers = os.dup(sys.stdout.fileno())
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # a stray print must not garble an answer
    _serve(sys.stdin.fileno(), answers)
