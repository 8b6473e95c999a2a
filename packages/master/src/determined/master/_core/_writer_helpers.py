"""Helper processes of the metrics writer: the work of a large request or batch that needs no
database, done outside the master's interpreter.

The master's threads share one interpreter lock, and at high ingestion rates the metrics writer's
own Python is time the HTTP thread cannot receive the next requests in. Two kinds of work go to a
helper process, where the writer waits on a pipe without holding the lock:

- a large batch's chart tiles (:meth:`WriterHelpers.start`, ``_tile_build.build``), built while
  the writer stores the batch's raw rows;
- large requests waiting behind the transaction in progress, prepared to store
  (:meth:`WriterHelpers.submit` of ``_prepared.call``, by ``_metrics_writer``): decoded, checked,
  their rows put in the database's insert form, their summaries' and tiles' columns made.

A helper is a pure function server (``fn(*args)`` for each call of a job, ``fn`` pickled by
name): the writer reads and writes the database, in its own transaction, as before. It is started
on first use (``python -m determined.master._core._writer_helpers``, a few light imports), serves
one job at a time, and exits when its pipe closes (the master stopped, or was killed). Any
failure of a helper (it died, a broken pipe) loses nothing: its job's ``local`` answer is used
instead (the tiles built in the writer's thread, requests parsed there), and the next job starts
a new helper.
"""

from __future__ import annotations

import atexit
import fcntl
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
from collections.abc import Callable, Sequence
from typing import Any

from determined.master._core._tile_build import Work, build

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
                raise TimeoutError(f"the writer helper did not answer within {TIMEOUT_S:g} s")
        part = os.read(fd, min(size, 1 << 20))
        if not part:
            raise EOFError("the writer helper's pipe closed")
        parts.append(part)
        size -= len(part)
    return b"".join(parts)


def _receive(fd: int, deadline: float | None = None) -> Any:
    (size,) = _HEADER.unpack(_read(fd, _HEADER.size, deadline))
    return pickle.loads(_read(fd, size, deadline))


PIPE_BYTES = 1 << 20
"""The pipes' buffer size asked for (Linux's default limit for a process): a job's requests or a
batch's points fit at once, so the writer does not wait for a helper that is not yet scheduled to
read them (the default 64 KiB made the writer wait for about a tenth of its time)."""
HELPER_NICE = 10
"""How much lower a helper's CPU priority is than the master's: a helper's job is throughput work,
while the master's threads and the database's backends answer requests one round trip at a time;
on a busy machine each round trip otherwise waits behind helpers for a core (PostgreSQL's
single-report acknowledgement, p50 / p99: 17.3 / 85.7 against 20.2 / 103.9 ms; benchmarks/RESULTS.md,
"Lanes that commit in any order")."""


def _widen(stream: Any) -> None:
    """Ask for a :data:`PIPE_BYTES` buffer on ``stream``'s pipe, where the system allows it."""
    set_size = getattr(fcntl, "F_SETPIPE_SZ", None)
    if stream is None or set_size is None:
        return
    try:
        fcntl.fcntl(stream.fileno(), set_size, PIPE_BYTES)
    except OSError:
        pass  # above the system's limit: the default size works, only slower


class _Helper:
    """One helper process and its pipes."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", __name__],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            bufsize=0,
        )
        for stream in (self.process.stdin, self.process.stdout):
            _widen(stream)

    def send(self, fn: Callable[..., Any], calls: Sequence[tuple[Any, ...]]) -> None:
        """Ask for ``[fn(*args) for args in calls]`` (``fn`` is pickled by name)."""
        assert self.process.stdin is not None
        _send(self.process.stdin.fileno(), (fn, list(calls)))

    def receive(self) -> list[Any]:
        assert self.process.stdout is not None
        status, value = _receive(self.process.stdout.fileno(), time.monotonic() + TIMEOUT_S)
        if status != "ok":
            raise RuntimeError(f"the writer helper failed:\n{value}")
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


class Job:
    """Calls being answered: :meth:`result` waits for them (in a helper, the writer's thread
    meanwhile stores a batch), :meth:`abandon` drops them (a failed transaction)."""

    def __init__(
        self, owner: WriterHelpers, local: Callable[[], list[Any]], helper: _Helper | None
    ) -> None:
        self._owner = owner
        self._local = local
        self._helper = helper

    def result(self) -> list[Any]:
        """The answers, in order; when no helper answers, what ``local`` gives (the writer's own
        work: the tiles built here, or nothing prepared)."""
        helper, self._helper = self._helper, None
        if helper is None:
            return self._local()
        try:
            answers = helper.receive()
        except Exception as exc:
            self._owner.lost(helper, exc)
            return self._local()
        self._owner.idle(helper)
        return answers

    def abandon(self) -> None:
        helper, self._helper = self._helper, None
        if helper is not None:  # its answer would be read by the next batch: stop it instead
            helper.kill()


class WriterHelpers:
    """Idle helper processes, one taken per job (a lane's tiles and its next requests' preparation
    run at once, and the lanes of PostgreSQL too)."""

    def __init__(self) -> None:
        self._idle: list[_Helper] = []
        self._lock = threading.Lock()
        self.failures = 0
        """Helpers lost to an error so far (tests and logs)."""
        self._failed_in_a_row = 0

    def start(self, works: Sequence[Work]) -> Job:
        """Start building ``works``: in a helper process when the batch is large."""

        def local() -> list[Any]:
            return [build(work) for work in works]

        if sum(work.size for work in works) < MIN_ROWS:
            return Job(self, local, None)
        return self.submit(build, [(work,) for work in works], local)

    def submit(
        self,
        fn: Callable[..., Any],
        calls: Sequence[tuple[Any, ...]],
        local: Callable[[], list[Any]],
    ) -> Job:
        """``[fn(*args) for args in calls]`` in a helper process (``fn`` a module-level function
        whose module imports nothing heavy); ``local`` gives the answers when no helper can."""
        if self._failed_in_a_row >= MAX_FAILURES_IN_A_ROW:
            return Job(self, local, None)
        helper = self._take_idle()
        try:
            if helper is None:
                helper = _Helper()
            helper.send(fn, calls)
        except Exception as exc:
            if helper is not None:
                self.lost(helper, exc)
            else:
                self._failed(f"starting a writer helper failed: {exc}")
            return Job(self, local, None)
        return Job(self, local, helper)

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
        """A helper that failed (it died, a broken pipe): stopped; the writer does its work."""
        self._failed(f"a writer helper failed ({exc}); its work is done in the writer")
        helper.kill()

    def _failed(self, message: str) -> None:
        with self._lock:
            self.failures += 1
            self._failed_in_a_row += 1
            given_up = self._failed_in_a_row == MAX_FAILURES_IN_A_ROW
        logger.warning("master: %s", message)
        if given_up:
            logger.error(
                "master: %d writer helpers failed in a row; this master does their work (chart"
                " tiles, preparing reports) in its metrics writer from now on",
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


HELPERS = WriterHelpers()
"""The process's helpers (stateless: masters in one process, as in tests, share them)."""
atexit.register(HELPERS.close)


def _serve(source: int, sink: int) -> None:
    """The helper's loop: answer each request's calls until the pipe closes."""
    import traceback

    while True:
        try:
            fn, calls = _receive(source)
        except EOFError:
            return
        try:
            reply: tuple[str, Any] = ("ok", [fn(*args) for args in calls])
        except Exception:
            reply = ("error", traceback.format_exc())
        _send(sink, reply)


if __name__ == "__main__":
    os.nice(HELPER_NICE)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the master's Ctrl-C is the master's to handle
    answers = os.dup(sys.stdout.fileno())
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # a stray print must not garble an answer
    _serve(sys.stdin.fileno(), answers)
