"""The local resource manager: allocations run as process groups on this machine.

One scheduling thread (woken by a condition on every change, never polling) turns the queue into
assignments with :class:`PriorityScheduler`. Each launched allocation gets a process group
(``start_new_session=True``), two reader threads (stdout, stderr), a waiter thread and a pump
thread that delivers ``allocation_started``, batched ``allocation_log`` calls and, last, exactly
one ``allocation_exited``.
"""

from __future__ import annotations

import logging
import os
import queue
import re
import shlex
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import IO, Any, Literal

from determined.master.rm._base import ResourceManager
from determined.master.rm._scheduler import DEFAULT_MAX_BYPASS, PriorityScheduler, Start
from determined.master.rm._slots import Gpu, cpu_slot_count, discover_gpus
from determined.master.rm._types import (
    UNSET,
    AllocationRequest,
    Assignment,
    LaunchSpec,
    LogLine,
    ResourceManagerEvents,
    Unset,
    parse_log_line,
)

logger = logging.getLogger("determined.master.rm")

ALLOCATION_ENV = "DET_ALLOCATION_ID"
"""The environment variable that marks a process as an allocation's (used by ``reap_orphan``)."""

LOCAL_ADDRESS = "127.0.0.1"
FLUSH_INTERVAL_S = 0.05
"""Longest time a read line waits before it is delivered."""
BATCH_MAX_LINES = 500
"""Most lines in one ``allocation_log`` call."""
READ_CHUNK = 65536
MAX_LINE_BYTES = 65536
"""A longer run of bytes without an end of line is delivered as a line of its own."""
PIPE_GRACE_S = 5.0
"""How long to wait for the pipes to close after the process group is gone."""

_LINE_END = re.compile(rb"\r\n|\r|\n")


@dataclass
class _Exit:
    code: int


class _EndOfStream:
    pass


_EOF = _EndOfStream()


def _read_lines(stream: IO[bytes]) -> Any:
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


class _Process:
    """A launched allocation's process group and the threads that watch it."""

    def __init__(self, allocation_id: str) -> None:
        self.allocation_id = allocation_id
        self.popen: subprocess.Popen[bytes] | None = None
        self.group_alive = False
        self.lines: queue.Queue[LogLine | _Exit | _EndOfStream] = queue.Queue()
        self.pump: threading.Thread | None = None
        self.done = threading.Event()


class LocalResourceManager(ResourceManager):
    """Runs allocations as subprocess groups on this machine; its GPUs, or CPU slots, are the slots.

    Args:
        slots: number of slots. On GPUs: use the first ``slots`` GPUs (default all). On CPUs:
            the number of CPU slots (default: the CPUs this process may use). A CPU slot is a
            scheduling unit only; nothing pins the process.
        slot_type: ``"cuda"`` (this machine's NVIDIA GPUs, found with ``nvidia-smi -L``),
            ``"cpu"``, or ``"auto"`` (GPUs when there are any).
        max_bypass: the scheduler's backfilling bound (see ``_scheduler``).
        flush_interval: longest time (s) a log line waits before delivery.
        batch_lines: most lines per ``allocation_log`` call.
    """

    def __init__(
        self,
        slots: int | None = None,
        slot_type: Literal["auto", "cpu", "cuda"] = "auto",
        *,
        max_bypass: int = DEFAULT_MAX_BYPASS,
        flush_interval: float = FLUSH_INTERVAL_S,
        batch_lines: int = BATCH_MAX_LINES,
    ) -> None:
        if slot_type not in ("auto", "cpu", "cuda"):
            raise ValueError(f"slot_type must be 'auto', 'cpu' or 'cuda', got {slot_type!r}")
        if slots is not None and (
            not isinstance(slots, int) or isinstance(slots, bool) or slots < 0
        ):
            raise ValueError(f"slots must be an int >= 0 or None, got {slots!r}")
        gpus: list[Gpu] = discover_gpus() if slot_type in ("auto", "cuda") else []
        if slot_type == "cuda" and not gpus:
            raise ValueError("slot_type 'cuda': no NVIDIA GPU found (nvidia-smi -L lists none)")
        self._gpus: list[Gpu] = []
        if gpus:
            if slots is not None and slots > len(gpus):
                raise ValueError(
                    f"slots: {slots} asked for, but this machine has only {len(gpus)} GPUs"
                )
            self._gpus = gpus if slots is None else gpus[:slots]
            self._slot_type = "cuda"
            total = len(self._gpus)
        else:
            self._slot_type = "cpu"
            total = cpu_slot_count() if slots is None else slots
        self._flush_interval = flush_interval
        self._batch_lines = batch_lines
        self._scheduler = PriorityScheduler(total, max_bypass=max_bypass)
        self._cond = threading.Condition()
        self._dirty = True
        self._closed = False
        self._events: ResourceManagerEvents | None = None
        self._thread: threading.Thread | None = None
        self._assigned: dict[str, Assignment] = {}
        self._processes: dict[str, _Process] = {}
        self._all_processes: list[_Process] = []

    # -------------------------------------------------------------------------------------------
    # scheduling

    def start(self, events: ResourceManagerEvents) -> None:
        """Begin scheduling on a daemon thread; ``events`` receives every notification."""
        with self._cond:
            if self._closed:
                raise RuntimeError("the resource manager is closed")
            if self._thread is not None:
                raise RuntimeError("the resource manager was started already")
            self._events = events
            self._thread = threading.Thread(
                target=self._schedule_loop, name="det-rm-local-scheduler", daemon=True
            )
            self._thread.start()

    def submit(self, request: AllocationRequest) -> None:
        """Queue ``request``; ValueError when it can never fit or its id is in use."""
        if request.resource_pool != "default":
            raise ValueError(
                f"resource_pool: the local resource manager has only the pool 'default',"
                f" not {request.resource_pool!r}"
            )
        with self._cond:
            reason = self._scheduler.unschedulable_reason(request)
            if reason is not None:
                raise ValueError(reason)
            if request.allocation_id in self._assigned:
                raise ValueError(f"allocation_id {request.allocation_id!r} was submitted already")
            self._scheduler.submit(request)
            self._wake()

    def withdraw(self, allocation_id: str) -> None:
        """Drop a queued request; an assigned but never launched one is released."""
        with self._cond:
            if self._scheduler.withdraw(allocation_id):
                return
            if allocation_id in self._assigned and allocation_id not in self._processes:
                self._release_locked(allocation_id)

    def release(self, allocation_id: str) -> None:
        """Free the allocation's slots; a process of it still running is killed first."""
        with self._cond:
            self._release_locked(allocation_id)

    def set_job_limits(
        self,
        job_id: str,
        *,
        priority: int | None = None,
        weight: float | None = None,
        max_slots: int | Unset | None = UNSET,
    ) -> None:
        """Change a job's priority, weight or ``max_slots``; the queue is reconsidered."""
        with self._cond:
            self._scheduler.set_job_limits(
                job_id, priority=priority, weight=weight, max_slots=max_slots
            )
            self._wake()

    def _release_locked(self, allocation_id: str) -> None:
        process = self._processes.pop(allocation_id, None)
        if process is not None:
            self._signal_locked(process, signal.SIGKILL)
        self._assigned.pop(allocation_id, None)
        self._scheduler.release(allocation_id)
        self._wake()

    def _wake(self) -> None:
        self._dirty = True
        self._cond.notify_all()

    def _schedule_loop(self) -> None:
        while True:
            with self._cond:
                while not self._dirty and not self._closed:
                    self._cond.wait()
                if self._closed:
                    return
                self._dirty = False
                starts = self._scheduler.schedule()
                decided = [(start.request, self._assign_locked(start)) for start in starts]
            for request, assignment in decided:
                self._notify("allocation_assigned", request, assignment)

    def _assign_locked(self, start: Start) -> Assignment:
        slot_ids = [self._slot_id(position) for position in start.slot_ids]
        gpu_uuids = [self._gpus[position].uuid for position in start.slot_ids] if self._gpus else []
        assignment = Assignment(
            allocation_id=start.request.allocation_id,
            slot_ids=slot_ids,
            container_addrs=[LOCAL_ADDRESS],
            container_slot_counts=[len(slot_ids)],
            gpu_uuids=gpu_uuids,
        )
        self._assigned[assignment.allocation_id] = assignment
        return assignment

    def _slot_id(self, position: int) -> int:
        return self._gpus[position].index if self._gpus else position

    def _notify(self, method: str, *args: Any) -> None:
        events = self._events
        if events is None:
            return
        try:
            getattr(events, method)(*args)
        except Exception:
            logger.exception("resource manager event %s%r failed", method, args[:1])

    # -------------------------------------------------------------------------------------------
    # processes

    def launch(self, spec: LaunchSpec) -> None:
        """Start the allocation's process group; the outcome arrives through the events."""
        allocation_id = spec.allocation_id
        with self._cond:
            if self._closed:
                raise RuntimeError("the resource manager is closed")
            assignment = self._assigned.get(allocation_id)
            if assignment is None:
                raise ValueError(f"allocation_id {allocation_id!r} is not assigned")
            if allocation_id in self._processes:
                raise ValueError(f"allocation_id {allocation_id!r} was launched already")
            process = _Process(allocation_id)
            self._processes[allocation_id] = process
            self._all_processes = [p for p in self._all_processes if not p.done.is_set()]
            self._all_processes.append(process)
            env = dict(spec.env)
            env.setdefault(ALLOCATION_ENV, allocation_id)
            if self._slot_type == "cuda":
                env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in assignment.slot_ids)
                env.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")  # the order nvidia-smi uses
            argv = list(spec.argv)
            if spec.startup_hook:
                # Sourced, as upstream does, so variables the hook exports reach the trial.
                # ("./" keeps `.` from searching PATH for a bare file name.)
                hook = spec.startup_hook if "/" in spec.startup_hook else f"./{spec.startup_hook}"
                script = f". {shlex.quote(hook)} && exec {shlex.join(argv)}"
                argv = ["bash", "-c", script]
            error: str | None = None
            try:
                process.popen = subprocess.Popen(
                    argv,
                    cwd=spec.cwd,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    start_new_session=True,
                    bufsize=0,
                )
                process.group_alive = True
            except OSError as exc:
                error = f"could not start {argv[0]!r} in {spec.cwd!r}: {exc}"
            process.pump = threading.Thread(
                target=self._pump,
                args=(process, error),
                name=f"det-rm-pump-{allocation_id}",
                daemon=True,
            )
            process.pump.start()

    def terminate(self, allocation_id: str) -> None:
        """SIGTERM to the allocation's whole process group (children and grandchildren)."""
        self._signal(allocation_id, signal.SIGTERM)

    def kill(self, allocation_id: str) -> None:
        """SIGKILL to the allocation's whole process group."""
        self._signal(allocation_id, signal.SIGKILL)

    def _signal(self, allocation_id: str, signum: int) -> None:
        with self._cond:
            process = self._processes.get(allocation_id)
            if process is not None:
                self._signal_locked(process, signum)

    def _signal_locked(self, process: _Process, signum: int) -> None:
        if process.popen is None or not process.group_alive:
            return
        try:
            os.killpg(process.popen.pid, signum)
        except (ProcessLookupError, PermissionError):
            pass

    def _pump(self, process: _Process, error: str | None) -> None:
        """Deliver started, the log batches and the exit of one allocation, in that order."""
        allocation_id = process.allocation_id
        try:
            if process.popen is None:
                line = LogLine(time.time(), "stderr", None, "LOG_LEVEL_ERROR", error or "")
                self._notify("allocation_log", allocation_id, [line])
                self._notify("allocation_exited", allocation_id, None, error)
                return
            popen = process.popen
            self._notify("allocation_started", allocation_id, popen.pid)
            readers = [
                threading.Thread(
                    target=self._read,
                    args=(process, stream, stdtype),
                    name=f"det-rm-{stdtype}-{allocation_id}",
                    daemon=True,
                )
                for stream, stdtype in ((popen.stdout, "stdout"), (popen.stderr, "stderr"))
            ]
            waiter = threading.Thread(
                target=self._wait, args=(process,), name=f"det-rm-wait-{allocation_id}", daemon=True
            )
            for thread in [*readers, waiter]:
                thread.start()
            exit_code = self._deliver_logs(process)
            self._notify("allocation_exited", allocation_id, exit_code, None)
        finally:
            process.done.set()

    def _deliver_logs(self, process: _Process) -> int | None:
        batch: list[LogLine] = []
        batch_started = 0.0
        streams_open = 2
        exit_code: int | None = None
        exited_at = 0.0
        while streams_open or exit_code is None:
            now = time.monotonic()
            timeout: float | None = None
            if batch:
                timeout = max(0.0, batch_started + self._flush_interval - now)
            elif exit_code is not None:
                timeout = max(0.0, exited_at + PIPE_GRACE_S - now)
            try:
                item = process.lines.get(timeout=timeout)
            except queue.Empty:
                if not batch:
                    logger.warning(
                        "allocation %s: output pipes still open after its process group ended",
                        process.allocation_id,
                    )
                    break
                self._notify("allocation_log", process.allocation_id, batch)
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
                    self._notify("allocation_log", process.allocation_id, batch)
                    batch = []
        if batch:
            self._notify("allocation_log", process.allocation_id, batch)
        return exit_code

    def _read(self, process: _Process, stream: IO[bytes] | None, stdtype: str) -> None:
        try:
            if stream is None:
                return
            with stream:
                for raw in _read_lines(stream):
                    text = raw.decode("utf-8", errors="replace")
                    process.lines.put(parse_log_line(text, stdtype, time.time()))
        except OSError:
            logger.exception("allocation %s: reading %s failed", process.allocation_id, stdtype)
        finally:
            process.lines.put(_EOF)

    def _wait(self, process: _Process) -> None:
        assert process.popen is not None
        code = process.popen.wait()
        with self._cond:
            # The leader is gone: end what it left behind so the allocation is really over.
            self._signal_locked(process, signal.SIGKILL)
            process.group_alive = False
        process.lines.put(_Exit(code))

    # -------------------------------------------------------------------------------------------
    # recovery, description, shutdown

    def reap_orphan(self, pid: int, *, allocation_id: str | None = None) -> bool:
        """Kill process group ``pid`` if a member carries ``DET_ALLOCATION_ID`` (of ``allocation_id``).

        A previous master's trials keep running after it died; the new master calls this with
        the pids it recorded. A pid reused by an unrelated process lacks the marker and is left
        alone. Returns True when the group was killed.
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

    def slot_count(self) -> int:
        """Total slots (GPUs, or CPU slots)."""
        return self._scheduler.total_slots

    @property
    def slot_type(self) -> str:
        """``"cuda"`` or ``"cpu"``."""
        return self._slot_type

    def describe(self) -> dict[str, Any]:
        """``{"type": "local", "slots", "slot_type", "used", "queued", "running", "gpus"}``."""
        with self._cond:
            return {
                "type": "local",
                "slots": self._scheduler.total_slots,
                "slot_type": self._slot_type,
                "used": self._scheduler.used_slots(),
                "queued": len(self._scheduler.queued()),
                "running": len(self._processes),
                "gpus": [{"index": g.index, "name": g.name, "uuid": g.uuid} for g in self._gpus],
            }

    def validate(
        self, slots: int, *, max_slots: int | None = None, resource_pool: str = "default"
    ) -> str | None:
        """The error for a request of ``slots`` that could never start here, else ``None``."""
        if resource_pool != "default":
            return (
                f"resource_pool {resource_pool!r} does not exist: the local resource manager"
                " has one pool, 'default'"
            )
        if not isinstance(slots, int) or isinstance(slots, bool) or slots < 0:
            return f"slots_per_trial must be an int >= 0, got {slots!r}"
        total = self._scheduler.total_slots
        if slots > total:
            return f"slots_per_trial {slots} exceeds the {total} slots of this machine"
        if slots > 0 and max_slots is not None and slots > max_slots:
            return f"slots_per_trial {slots} exceeds resources.max_slots {max_slots}"
        return None

    def close(self, timeout: float = 10.0) -> None:
        """Stop scheduling, kill every process group and wait for their exits to be delivered."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            for process in self._processes.values():
                self._signal_locked(process, signal.SIGKILL)
            processes = list(self._all_processes)
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        deadline = time.monotonic() + timeout
        for process in processes:
            process.done.wait(max(0.0, deadline - time.monotonic()))
