"""One allocation's process group on this machine, the threads that watch it, and orphan reaping.

A :class:`ProcessGroup` starts its leader with ``start_new_session=True``; two reader threads
(stdout, stderr), a waiter thread and a pump thread deliver ``allocation_started``, batched
``allocation_log`` calls and, last, exactly one ``allocation_exited`` through a ``notify`` callable.

The exit is noticed by the waiter blocking in ``wait()`` on the leader (no polling); the group is
then killed, and the exit is delivered once the output pipes closed. A process that left the group
(a launcher starts torchrun in a session of its own) may still hold the pipes: after
``ESCAPE_GRACE_S`` every process carrying the allocation's ``DET_ALLOCATION_ID`` is killed too, and
after ``PIPE_GRACE_S`` the exit is delivered whatever still holds them.
"""

from __future__ import annotations

import logging
import os
import queue
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import IO

from determined.master.rm._types import LogLine, parse_log_line

logger = logging.getLogger("determined.master.rm")

ALLOCATION_ENV = "DET_ALLOCATION_ID"
CLUSTER_ENV = "DET_CLUSTER_ID"
"""The environment variable that marks a process as an allocation's (used by ``reap_orphan``)."""

FLUSH_INTERVAL_S = 0.05
"""Longest time a read line waits before it is delivered."""
BATCH_MAX_LINES = 500
"""Most lines in one ``allocation_log`` call."""
READ_CHUNK = 65536
MAX_LINE_BYTES = 65536
"""A longer run of bytes without an end of line is delivered as a line of its own."""
ESCAPE_GRACE_S = 0.05
"""How long the pipes may stay open after the group is gone before the allocation's processes
outside the group are looked for and killed."""
PIPE_GRACE_S = 0.4
"""How long to wait for the pipes to close after the process group is gone (then the exit is
delivered anyway; later output is lost)."""

_LINE_END = re.compile(rb"\r\n|\r|\n")

Notify = Callable[..., None]
"""``notify(method, *args)``: calls ``ResourceManagerEvents.<method>(*args)``."""


@dataclass
class _Exit:
    code: int


class _EndOfStream:
    pass


_EOF = _EndOfStream()


def read_lines(stream: IO[bytes]) -> Iterator[bytes]:
    """Yield the lines of a raw pipe, ended by ``\\n``, ``\\r\\n`` or a lone ``\\r`` (progress bars)."""
    fd = stream.fileno()
    pending = b""
    while True:
        chunk = os.read(fd, READ_CHUNK)
        if not chunk:
            break
        pending += chunk
        held = b""
        if pending.endswith(b"\r"):  # maybe the first half of "\r\n"
            pending, held = pending[:-1], b"\r"
        parts = _LINE_END.split(pending)
        pending = parts.pop() + held
        yield from parts
        while len(pending) > MAX_LINE_BYTES:
            yield pending[:MAX_LINE_BYTES]
            pending = pending[MAX_LINE_BYTES:]
    pending = pending.rstrip(b"\r")
    if pending:
        yield pending


class ProcessGroup:
    """A launched allocation's process group and the threads that watch it.

    Args:
        allocation_id: the allocation it runs.
        lock: the resource manager's lock; ``signal`` is called with it held, and the waiter
            takes it to mark the group gone.
        notify: where ``allocation_started``/``allocation_log``/``allocation_exited`` go.
        flush_interval: longest time (s) a log line waits before delivery.
        batch_lines: most lines per ``allocation_log`` call.
    """

    def __init__(
        self,
        allocation_id: str,
        lock: threading.Condition,
        notify: Notify,
        *,
        flush_interval: float = FLUSH_INTERVAL_S,
        batch_lines: int = BATCH_MAX_LINES,
    ) -> None:
        self.allocation_id = allocation_id
        self.popen: subprocess.Popen[bytes] | None = None
        self.group_alive = False
        self.done = threading.Event()
        self._lock = lock
        self._notify = notify
        self._flush_interval = flush_interval
        self._batch_lines = batch_lines
        self._lines: queue.Queue[LogLine | _Exit | _EndOfStream] = queue.Queue()
        self._cluster_id = ""

    def start(self, argv: list[str], cwd: str, env: dict[str, str]) -> None:
        """Start the leader as a new session and the pump thread (a failure to start is
        reported as the allocation's exit, never raised)."""
        self._cluster_id = env.get(CLUSTER_ENV, "")
        error: str | None = None
        try:
            self.popen = subprocess.Popen(
                argv,
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                bufsize=0,
            )
            self.group_alive = True
        except OSError as exc:
            error = f"could not start {argv[0]!r} in {cwd!r}: {exc}"
        threading.Thread(
            target=self._pump,
            args=(error,),
            name=f"det-rm-pump-{self.allocation_id}",
            daemon=True,
        ).start()

    def signal(self, signum: int) -> None:
        """``signum`` to the whole group while it lives (call with the lock held)."""
        if self.popen is None or not self.group_alive:
            return
        try:
            os.killpg(self.popen.pid, signum)
        except (ProcessLookupError, PermissionError):
            pass

    def _pump(self, error: str | None) -> None:
        """Deliver started, the log batches and the exit of the allocation, in that order."""
        allocation_id = self.allocation_id
        try:
            if self.popen is None:
                line = LogLine(time.time(), "stderr", None, "LOG_LEVEL_ERROR", error or "")
                self._notify("allocation_log", allocation_id, [line])
                self._notify("allocation_exited", allocation_id, None, error)
                return
            popen = self.popen
            self._notify("allocation_started", allocation_id, popen.pid)
            readers = [
                threading.Thread(
                    target=self._read,
                    args=(stream, stdtype),
                    name=f"det-rm-{stdtype}-{allocation_id}",
                    daemon=True,
                )
                for stream, stdtype in ((popen.stdout, "stdout"), (popen.stderr, "stderr"))
            ]
            waiter = threading.Thread(
                target=self._wait, name=f"det-rm-wait-{allocation_id}", daemon=True
            )
            for thread in [*readers, waiter]:
                thread.start()
            exit_code = self._deliver_logs()
            self._notify("allocation_exited", allocation_id, exit_code, None)
        finally:
            self.done.set()

    def _deliver_logs(self) -> int | None:
        batch: list[LogLine] = []
        batch_started = 0.0
        streams_open = 2
        exit_code: int | None = None
        exited_at = 0.0
        swept = False
        while streams_open or exit_code is None:
            now = time.monotonic()
            timeout: float | None = None
            if batch:
                timeout = max(0.0, batch_started + self._flush_interval - now)
            elif exit_code is not None:
                grace = PIPE_GRACE_S if swept else ESCAPE_GRACE_S
                timeout = max(0.0, exited_at + grace - now)
            try:
                item = self._lines.get(timeout=timeout)
            except queue.Empty:
                if not batch and not swept:
                    swept = True  # something outside the group holds the pipes
                    kill_marked(self.allocation_id, self._cluster_id)
                    continue
                if not batch:
                    logger.warning(
                        "allocation %s: output pipes still open after its process group ended",
                        self.allocation_id,
                    )
                    break
                self._notify("allocation_log", self.allocation_id, batch)
                batch = []
                continue
            if isinstance(item, _EndOfStream):
                streams_open -= 1
            elif isinstance(item, _Exit):
                exit_code, exited_at = item.code, time.monotonic()
            else:
                if not batch:
                    batch_started = time.monotonic()
                batch.append(item)
                if len(batch) >= self._batch_lines:
                    self._notify("allocation_log", self.allocation_id, batch)
                    batch = []
        if batch:
            self._notify("allocation_log", self.allocation_id, batch)
        return exit_code

    def _read(self, stream: IO[bytes] | None, stdtype: str) -> None:
        try:
            if stream is None:
                return
            with stream:
                for raw in read_lines(stream):
                    text = raw.decode("utf-8", errors="replace")
                    self._lines.put(parse_log_line(text, stdtype, time.time()))
        except OSError:
            logger.exception("allocation %s: reading %s failed", self.allocation_id, stdtype)
        finally:
            self._lines.put(_EOF)

    def _wait(self) -> None:
        assert self.popen is not None
        wait_unreaped(self.popen.pid)
        with self._lock:
            # The leader is gone: end what it left behind so the allocation is really over. Not
            # reaped yet, it still holds its pid, so the group id cannot name anyone else's group.
            self.signal(signal.SIGKILL)
            self.group_alive = False
        self._lines.put(_Exit(self.popen.wait()))


def wait_unreaped(pid: int) -> None:
    """Block until child ``pid`` has exited, leaving it a zombie (not reaped).

    A reaped pid, and the process group id it led, can be handed to an unrelated process (pids
    wrap around at ``pid_max``, 32768 on many machines), so a ``killpg`` after reaping may kill a
    stranger's processes. Killing the group between this call and the reap is always safe.
    """
    try:
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
    except ChildProcessError:
        pass  # reaped already (by whoever called wait first)


def kill_marked(allocation_id: str, cluster_id: str = "") -> int:
    """SIGKILL every process of this machine whose environment holds
    ``DET_ALLOCATION_ID=<allocation_id>`` and, when ``cluster_id`` is given,
    ``DET_CLUSTER_ID=<cluster_id>`` (an allocation's processes that left its process group);
    returns how many were signalled. The cluster id keeps another master's allocation of the same
    id (experiment 1 of two masters created in the same second) out of it."""
    needles = [f"{ALLOCATION_ENV}={allocation_id}".encode()]
    if cluster_id:
        needles.append(f"{CLUSTER_ENV}={cluster_id}".encode())
    killed = 0
    me = os.getpid()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                entries = f.read().split(b"\0")
            if all(needle in entries for needle in needles):
                os.kill(int(name), signal.SIGKILL)
                killed += 1
        except (OSError, ValueError):
            continue
    if killed:
        logger.info("allocation %s: killed %d process(es) outside its group", allocation_id, killed)
    return killed


def reap_process_group(pid: int, allocation_id: str | None = None) -> bool:
    """Kill process group ``pid`` if a member carries ``DET_ALLOCATION_ID`` (of ``allocation_id``).

    A previous master's trials keep running after it died; the new master calls this with the
    pids it recorded. A pid reused by an unrelated process lacks the marker and is left alone.
    Returns True when the group was killed.
    """
    import psutil  # recovery only: keep it off the import path

    if pid <= 1 or pid in (os.getpid(), os.getpgrp()):
        logger.warning("reap_orphan: refusing pid %d (this master or init)", pid)
        return False
    members = []
    for candidate in psutil.process_iter():
        try:
            if os.getpgid(candidate.pid) == pid:
                members.append(candidate)
        except (ProcessLookupError, PermissionError):
            continue
    if not members:
        return False
    marked = False
    for member in members:
        try:
            value = member.environ().get(ALLOCATION_ENV)
        except (psutil.Error, OSError):
            continue
        if value and (allocation_id is None or value == allocation_id):
            marked = True
            break
    if not marked:
        logger.warning(
            "reap_orphan: process group %d does not belong to an allocation; left alone", pid
        )
        return False
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return False
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        alive = []
        for member in members:
            try:
                if member.status() != psutil.STATUS_ZOMBIE:
                    alive.append(member)
            except psutil.NoSuchProcess:
                continue
        if not alive:
            break
        time.sleep(0.01)  # not psutil.wait_procs: it would reap our own children's status
    logger.info("reap_orphan: killed process group %d", pid)
    return True
