"""What runs on each Ray node of a trial: unpack the context, run that node's ranks, hand back logs.

:class:`NodeRunner` runs one allocation's share on a node; :class:`NodeAgent` is the per-node actor
holding the runners (``_agents`` wraps it with ``ray.remote`` as a threaded actor, so a signal
reaches the processes while a ``poll`` waits). This module imports no Ray: Ray's worker processes
on every node import it (so each node needs det-master installed), and so do the tests.

A trial's processes must not outlive their actor: when the actor dies (its node lost, the master's
driver gone, ``ray.kill``), no code of it runs any more. So every launch starts a tiny *watcher*
process holding the read end of a pipe whose write end only the actor holds; the watcher blocks
on it and kills the trial's processes when it reads end-of-file, however the actor ended.

"The trial's processes" are more than its process group: a launcher may start its workers in a
session of their own (``determined.launch.torch_distributed`` does, for torchrun), and a SIGKILL
to the group leaves those behind. So every process of a launch carries a marker variable
(``DET_RAY_RUN``, a random token inherited by every descendant), and a kill reaches the group and
every process of this user whose environment holds the marker.

A group id is only killed while it certainly still names the launch's group: while its leader is
this actor's child and not reaped (``poll`` kills the leftovers before it reaps the leader), or
while a process carrying the marker is in it. Pids wrap around, so an id whose processes are all
gone may already lead a stranger's group.
"""

from __future__ import annotations

import inspect
import io
import json
import os
import pathlib
import queue
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import uuid
from typing import IO, Any

from determined.core.plugins import PortHold, hold_rendezvous_ports
from determined.master.rm._process import read_lines, wait_unreaped

FLUSH_INTERVAL_S = 0.05
"""How long ``poll`` gathers more lines after the first one arrived."""
BATCH_MAX_LINES = 500

MARKER_ENV = "DET_RAY_RUN"
"""Set to a random token in every process of one launch on one node (see the module docstring)."""


def kill_marked(pgid: int, marker: str, group_held: bool = False) -> None:
    """SIGKILL to every process whose environment holds ``marker`` (``NAME=token``) and to
    process group ``pgid`` when it is still the launch's: ``group_held`` (its leader is the
    caller's unreaped child) or a marked process is in it. Self-contained (the watcher script is
    its source text)."""
    import os
    import signal

    needle = marker.encode()
    marked: list[int] = []
    groups: set[int] = set()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                if needle in f.read().split(b"\0"):
                    groups.add(os.getpgid(int(name)))
                    marked.append(int(name))
        except (OSError, ValueError):
            continue
    if group_held or pgid in groups:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    for pid in marked:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


_WATCHER = (
    inspect.getsource(kill_marked)
    + "import os, sys\n"
    + "told = b''\n"
    + "while chunk := os.read(0, 65536):\n"
    + "    told += chunk\n"
    + "if not told:\n"
    + "    kill_marked(int(sys.argv[1]), sys.argv[2])\n"
)
"""Blocks until the actor's end of its stdin pipe closes; unless the actor wrote that it ended
the launch itself, kills the trial's processes."""

_DROPPED_ENV = ("OMP_NUM_THREADS", "CUDA_VISIBLE_DEVICES")
"""Variables Ray sets for its own workers that must not leak into a trial (the master's choice, or
the launcher's, applies instead)."""


def pack_directory(path: str | os.PathLike[str]) -> bytes:
    """A gzip tarball of ``path``'s contents (the extracted context the master prepared)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=1) as tar:
        for child in sorted(pathlib.Path(path).iterdir()):
            tar.add(child, arcname=child.name)
    return buffer.getvalue()


def bundle_gpu_ids() -> list[str]:
    """The GPU ids Ray gave the calling task (run once per bundle of a GPU placement group)."""
    import ray

    return [str(i) for i in ray.get_gpu_ids()]


def node_environment(
    base: dict[str, str], task_env: dict[str, str], path_prefix: str
) -> dict[str, str]:
    """The environment of a rank on this node: this node's own environment (less Ray's worker
    settings and any stale ``DET_*``), the task's variables over it, ``path_prefix`` before PATH."""
    env = {
        k: v
        for k, v in base.items()
        if not k.startswith(("RAY_", "DET_")) and k not in _DROPPED_ENV
    }
    env.update(task_env)
    if path_prefix:
        env["PATH"] = path_prefix + os.pathsep + base.get("PATH", "")
    return env


class NodeRunner:
    """Runs one node's share of an allocation as a process group and buffers its output.

    Args:
        allocation_id: the allocation (marks the processes with ``DET_ALLOCATION_ID``).
        container_rank: this node's index among the allocation's nodes.
        root: where the context is unpacked (a fresh directory below it; removed at ``cleanup``).
    """

    def __init__(self, allocation_id: str, container_rank: int, root: str | None = None) -> None:
        self.allocation_id = allocation_id
        self.container_rank = container_rank
        base = pathlib.Path(root or os.path.join(tempfile.gettempdir(), "det-ray"))
        base.mkdir(parents=True, exist_ok=True)
        safe = allocation_id.replace("/", "_")
        self.dir = pathlib.Path(tempfile.mkdtemp(prefix=f"{safe}.{container_rank}.", dir=base))
        self._lines: queue.Queue[tuple[float, str, str] | None] = queue.Queue()
        self._popen: subprocess.Popen[bytes] | None = None
        self._watcher: subprocess.Popen[bytes] | None = None
        self._watch_fd: int | None = None
        self._exit: int | None = None
        self._open_streams = 0
        self._lock = threading.Lock()
        self._signalled: int | None = None
        self._group_ended = False
        self.marker = f"{MARKER_ENV}={uuid.uuid4().hex}"

    # -- identity ------------------------------------------------------------------------------

    def node(self) -> dict[str, Any]:
        """Where this actor runs: ``{"hostname", "pid"}`` (the address comes from Ray)."""
        return {"hostname": socket.gethostname(), "pid": os.getpid()}

    # -- running -------------------------------------------------------------------------------

    def start(
        self,
        context: bytes,
        cluster_info: dict[str, Any],
        argv: list[str],
        task_env: dict[str, str],
        path_prefix: str,
        startup_hook: str | None,
    ) -> int:
        """Unpack ``context``, write this node's ClusterInfo, start ``argv``; its process group id.

        ``startup_hook`` is a file name inside the context, sourced before ``argv`` like the local
        resource manager does. Raises OSError when the program cannot be started.
        """
        work = self.dir / "work"
        run_dir = self.dir / "info"
        work.mkdir()
        run_dir.mkdir()
        with tarfile.open(fileobj=io.BytesIO(context), mode="r:gz") as tar:
            tar.extractall(work, filter="tar")
        info_path = run_dir / "cluster.json"
        fd = os.open(info_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(cluster_info, f)
        env = node_environment(dict(os.environ), task_env, path_prefix)
        env.update(
            {
                "DET_CLUSTER_INFO": str(info_path),
                "DET_WORKDIR": str(work),
                "DET_RUN_DIR": str(run_dir),
                "DET_ALLOCATION_ID": self.allocation_id,
                "DET_SLOT_IDS": json.dumps(cluster_info.get("slot_ids", [])),
                "DET_AGENT_ID": str(cluster_info.get("agent_id", "")),
                MARKER_ENV: self.marker.split("=", 1)[1],
            }
        )
        argv = list(argv)
        if startup_hook:
            script = f". ./{shlex.quote(startup_hook)} && exec {shlex.join(argv)}"
            argv = ["bash", "-c", script]
        with self._lock:
            if self._signalled == signal.SIGKILL:
                raise OSError("the allocation was killed before it started")
            self._popen = subprocess.Popen(
                argv,
                cwd=work,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                bufsize=0,
            )
            pid = self._popen.pid
            read_fd, self._watch_fd = os.pipe()
            try:
                self._watcher = subprocess.Popen(
                    [sys.executable, "-c", _WATCHER, str(pid), self.marker],
                    stdin=read_fd,
                    start_new_session=True,
                )
            finally:
                os.close(read_fd)
            if self._signalled is not None:
                self._send_locked(self._signalled)
        self._open_streams = 2
        for stream, stdtype in ((self._popen.stdout, "stdout"), (self._popen.stderr, "stderr")):
            threading.Thread(
                target=self._read, args=(stream, stdtype), name=f"det-ray-{stdtype}", daemon=True
            ).start()
        return pid

    def _read(self, stream: IO[bytes] | None, stdtype: str) -> None:
        try:
            if stream is not None:
                with stream:
                    for raw in read_lines(stream):
                        text = raw.decode("utf-8", errors="replace")
                        self._lines.put((time.time(), stdtype, text))
        except OSError:
            pass
        finally:
            self._lines.put(None)

    def poll(self, timeout: float) -> tuple[list[tuple[float, str, str]], int | None]:
        """Lines written since the last call (waiting up to ``timeout`` s for the first one), and
        the exit code once the process has exited and both streams are drained (else ``None``).
        """
        lines: list[tuple[float, str, str]] = []
        deadline = time.monotonic() + timeout
        flush_at: float | None = None
        while len(lines) < BATCH_MAX_LINES and self._open_streams:
            until = deadline if flush_at is None else min(deadline, flush_at)
            try:
                item = self._lines.get(timeout=max(0.0, until - time.monotonic()))
            except queue.Empty:
                break
            if item is None:
                self._open_streams -= 1
                continue
            lines.append(item)
            if flush_at is None:
                flush_at = time.monotonic() + FLUSH_INTERVAL_S
        if self._open_streams or self._popen is None:
            return lines, None
        return lines, self._end_group()

    def signal(self, signum: int) -> None:
        """Send ``signum`` to the whole process group (also remembered for a start still to come);
        SIGKILL also reaches every marked process (workers in sessions of their own)."""
        with self._lock:
            if self._signalled != signal.SIGKILL:
                self._signalled = signum
            self._send_locked(signum)

    def _send_locked(self, signum: int) -> None:
        if self._popen is None:
            return
        if signum == signal.SIGKILL:
            kill_marked(self._popen.pid, self.marker, group_held=not self._group_ended)
        elif not self._group_ended:
            try:
                os.killpg(self._popen.pid, signum)
            except (ProcessLookupError, PermissionError):
                pass

    def _end_group(self) -> int:
        """Wait for the leader to exit, kill what it left behind while the unreaped leader still
        holds the group id, release the watcher, then reap the leader; its exit code."""
        assert self._popen is not None
        wait_unreaped(self._popen.pid)
        with self._lock:
            if not self._group_ended:
                kill_marked(self._popen.pid, self.marker, group_held=True)
                self._group_ended = True
            if self._watch_fd is not None:
                try:
                    os.write(self._watch_fd, b"ended")
                except OSError:
                    pass  # the watcher is gone already
                os.close(self._watch_fd)
                self._watch_fd = None
        if self._watcher is not None:
            try:
                self._watcher.wait(10)
            except subprocess.TimeoutExpired:
                pass
        return self._popen.wait()

    def cleanup(self) -> None:
        """Kill the group if it still runs and remove this node's copy of the context."""
        self.signal(signal.SIGKILL)
        if self._popen is not None:
            self._end_group()
        shutil.rmtree(self.dir, ignore_errors=True)


class NodeAgent:
    """The master's actor on one Ray node: runs the node's share of any number of allocations.

    One long-lived agent per node (not one per allocation) keeps a trial's start-up off the
    critical path of a new Ray worker process. Every method names its allocation; a ``signal``
    that arrives before the ``start`` it should reach is kept and applied by ``start``.
    """

    def __init__(self, work_root: str | None = None) -> None:
        self.work_root = work_root
        self._runners: dict[str, NodeRunner] = {}
        self._pending: dict[str, int] = {}
        self._holds: dict[str, list[PortHold]] = {}
        self._lock = threading.Lock()

    def node(self) -> dict[str, Any]:
        """``{"hostname", "pid"}`` of this agent (also a cheap liveness probe)."""
        return {"hostname": socket.gethostname(), "pid": os.getpid()}

    def hold_rendezvous_ports(self, allocation_id: str) -> dict[str, str]:
        """A multi-node trial's rendezvous and collective ports on this node (its chief's), held
        until the allocation's :meth:`cleanup`; the variables naming them for every node's ranks."""
        hold = hold_rendezvous_ports()
        with self._lock:
            self._holds.setdefault(allocation_id, []).append(hold)
        return hold.env

    def start(
        self,
        allocation_id: str,
        container_rank: int,
        context: bytes,
        cluster_info: dict[str, Any],
        argv: list[str],
        task_env: dict[str, str],
        path_prefix: str,
        startup_hook: str | None,
    ) -> int:
        """Start this node's ranks of ``allocation_id`` (see :meth:`NodeRunner.start`)."""
        runner = NodeRunner(allocation_id, container_rank, self.work_root)
        with self._lock:
            if allocation_id in self._runners:
                raise ValueError(f"allocation {allocation_id} was started on this node already")
            self._runners[allocation_id] = runner
            pending = self._pending.pop(allocation_id, None)
        if pending is not None:
            runner.signal(pending)
        return runner.start(context, cluster_info, argv, task_env, path_prefix, startup_hook)

    def poll(
        self, allocation_id: str, timeout: float
    ) -> tuple[list[tuple[float, str, str]], int | None]:
        """See :meth:`NodeRunner.poll`."""
        with self._lock:
            runner = self._runners.get(allocation_id)
        if runner is None:
            raise ValueError(f"allocation {allocation_id} is not running on this node")
        return runner.poll(timeout)

    def signal(self, allocation_id: str, signum: int) -> None:
        """Signal the allocation's process group here (or remember it for a start to come)."""
        with self._lock:
            runner = self._runners.get(allocation_id)
            if runner is None:
                if self._pending.get(allocation_id) != signal.SIGKILL:
                    self._pending[allocation_id] = signum
                return
        runner.signal(signum)

    def cleanup(self, allocation_id: str) -> None:
        """Kill what is left of the allocation here and remove its files."""
        with self._lock:
            runner = self._runners.pop(allocation_id, None)
            self._pending.pop(allocation_id, None)
            holds = self._holds.pop(allocation_id, [])
        if runner is not None:
            runner.cleanup()
        for hold in holds:
            hold.release()

    def shutdown(self) -> None:
        """Kill every allocation's processes on this node (the master is closing)."""
        with self._lock:
            runners = list(self._runners.values())
            self._runners.clear()
            holds = [hold for held in self._holds.values() for hold in held]
            self._holds.clear()
        for runner in runners:
            runner.cleanup()
        for hold in holds:
            hold.release()
