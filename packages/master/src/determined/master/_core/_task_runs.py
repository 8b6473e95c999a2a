"""Live tasks beyond trials: their allocations' events, stops, readiness and exits.

:class:`TaskRuns` keeps what the master knows in memory about each task that has not ended
(:class:`LiveTask`) and turns the resource manager's events for their allocations (routed here by
``AllocationEvents``) into launches and stored states: QUEUED → STARTING (assigned, launched) →
RUNNING (process up; a proxied task becomes ready once its port answers) → TERMINATING (asked to
stop) → TERMINATED (exited; slots, login session and work released).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from determined.master._core._task_launch import free_port, prepare_task
from determined.master._core._task_logs import master_log
from determined.master._core._work_dirs import WorkDirs
from determined.master.db import Allocation, Database, NtscTask, Task, User, UserSession, utcnow

logger = logging.getLogger("determined.master")

KILL_GRACE_S = 5.0
"""Seconds between SIGTERM and SIGKILL when a task is stopped."""


@dataclasses.dataclass
class LiveTask:
    """What the master keeps in memory about a task that has not ended."""

    task_id: str
    allocation_id: str
    kind: str
    owner_id: int
    proxied: bool
    idle_timeout: float | None
    assigned: bool = False
    launched: bool = False
    running: bool = False
    ready: bool = False
    exited: bool = False
    kill_reason: str | None = None
    kill_at: float | None = None
    address: str | None = None
    port: int | None = None
    last_activity: float = dataclasses.field(default_factory=time.monotonic)


class TaskRuns:
    """The live tasks of one master and their allocations (thread-safe)."""

    def __init__(
        self,
        db: Database,
        rm: Any,
        work_dirs: WorkDirs,
        cluster_id: str,
        master_url: Callable[[], str],
    ) -> None:
        self._db = db
        self._rm = rm
        self._work_dirs = work_dirs
        self._cluster_id = cluster_id
        self._master_url = master_url
        self._lock = threading.Lock()
        self._live: dict[str, LiveTask] = {}
        self._by_alloc: dict[str, str] = {}
        self._tokens: dict[str, str] = {}

    def register(self, live: LiveTask, token: str) -> None:
        """Track a task just stored (before its request goes to the resource manager)."""
        with self._lock:
            self._live[live.task_id] = live
            self._by_alloc[live.allocation_id] = live.task_id
            self._tokens[live.allocation_id] = token

    def owns(self, allocation_id: str) -> bool:
        """Whether the allocation is a live task's (its RM events come here, not to trials)."""
        return allocation_id in self._by_alloc

    def live(self) -> list[LiveTask]:
        """The tasks that have not ended (copies of the in-memory state)."""
        with self._lock:
            return [dataclasses.replace(t) for t in self._live.values()]

    def live_task(self, task_id: str) -> LiveTask | None:
        """The in-memory state of a task that has not ended (a copy), else None."""
        with self._lock:
            task = self._live.get(task_id)
            return dataclasses.replace(task) if task is not None else None

    def stop(self, task_id: str, reason: str) -> None:
        """Terminate a live task (SIGTERM, SIGKILL after :data:`KILL_GRACE_S`); ``reason`` is
        its exit status."""
        with self._lock:
            live = self._live.get(task_id)
            if live is None or live.exited or live.kill_reason is not None:
                return
            live.kill_reason = reason
            launched, assigned = live.launched, live.assigned
            if launched:
                live.kill_at = time.monotonic() + KILL_GRACE_S
        if launched:
            with self._db.write() as session:
                row = session.get(NtscTask, task_id)
                if row is not None and row.state != "TERMINATED":
                    row.state = "TERMINATING"
                master_log(
                    session, task_id, f"stopping: {reason}", allocation_id=live.allocation_id
                )
            self._rm.terminate(live.allocation_id)
        elif not assigned:
            self._rm.withdraw(live.allocation_id)
            self._finish(live.allocation_id, None, None)
        # assigned but not launched: the assignment handler sees kill_reason and ends it

    def kill_now(self, task_id: str) -> None:
        """SIGKILL a launched task (it ignored SIGTERM for the grace period)."""
        with self._lock:
            live = self._live.get(task_id)
            if live is None or live.exited or not live.launched:
                return
            live.kill_at = None
        self._rm.kill(live.allocation_id)

    def touch(self, task_id: str) -> None:
        """Record activity (a proxied request): it pushes the idle timeout back."""
        live = self._live.get(task_id)
        if live is not None:
            live.last_activity = time.monotonic()

    # ------------------------------------------------------------------------------------------
    # resource-manager events (on the master's event thread)

    def assigned(self, request: Any, assignment: Any) -> None:
        """Prepare the work directory and environment, then launch (or give the slots back)."""
        aid = request.allocation_id
        with self._lock:
            task_id = self._by_alloc.get(aid)
            live = self._live.get(task_id) if task_id else None
            if live is None or live.exited:
                self._rm.release(aid)
                return
            live.assigned = True
            if live.kill_reason is not None:
                self._rm.release(aid)
                live.exited = True
        if live.exited:
            self._finish(aid, None, None)
            return
        with self._db.read() as session:
            row = session.get(NtscTask, live.task_id)
            user = session.get(User, row.owner_id) if row else None
            session.expunge_all()
        if row is None:
            self._rm.release(aid)
            return
        address = (list(assignment.container_addrs) or ["127.0.0.1"])[0]
        work_dir = self._work_dirs.of(aid)
        try:
            port = free_port(address) if row.proxied else None
            argv, env, hook = prepare_task(
                work_dir=work_dir,
                context=row.context,
                kind=row.kind,
                task_id=row.task_id,
                allocation_id=aid,
                argv=list(row.argv),
                config=dict(row.config or {}),
                extra_env=dict(row.env or {}),
                master_url=self._master_url(),
                cluster_id=self._cluster_id,
                user=user.username if user else "determined",
                token=self._tokens.get(aid, ""),
                slot_ids=list(assignment.slot_ids),
                gpu_uuids=list(assignment.gpu_uuids),
                port=port,
                slot_type=str((self._rm.describe() or {}).get("slot_type", "cpu")),
            )
        except Exception as e:
            self._rm.release(aid)
            self._finish(aid, None, f"failed to prepare the task: {e}")
            return
        with self._db.write() as session:
            current = session.get(NtscTask, live.task_id)
            if current is not None:
                current.state = "STARTING"
                current.address = address
                current.port = port
            alloc_row = session.get(Allocation, aid)
            if alloc_row is not None:
                alloc_row.state = "ASSIGNED"
            master_log(
                session,
                live.task_id,
                f"assigned slots {list(assignment.slot_ids)}; launching {argv}",
                allocation_id=aid,
            )
        from determined.master.rm import LaunchSpec

        with self._lock:
            live.address, live.port = address, port
            if live.kill_reason is not None:
                live.exited = True
            else:
                live.launched = True
                live.kill_at = None
        if live.exited:
            self._rm.release(aid)
            self._finish(aid, None, None)
            return
        self._rm.launch(
            LaunchSpec(allocation_id=aid, argv=argv, cwd=str(work_dir), env=env, startup_hook=hook)
        )

    def started(self, allocation_id: str, pid: int) -> None:
        """The process runs: RUNNING (a proxied task is ready once its port answers)."""
        with self._lock:
            task_id = self._by_alloc.get(allocation_id)
            live = self._live.get(task_id) if task_id else None
            if live is not None:
                live.running = True
                live.ready = not live.proxied
                live.last_activity = time.monotonic()
        if live is None:
            return
        with self._db.write() as session:
            alloc_row = session.get(Allocation, allocation_id)
            if alloc_row is not None:
                alloc_row.pid = pid
                alloc_row.state = "RUNNING"
                alloc_row.start_time = utcnow()
            row = session.get(NtscTask, live.task_id)
            if row is not None and row.state in ("QUEUED", "STARTING"):
                row.state = "RUNNING"
                row.ready = not live.proxied
                row.last_activity = utcnow()

    def exited(self, allocation_id: str, exit_code: int | None, error: str | None) -> None:
        """The process ended: the task is TERMINATED, its slots and login session released."""
        self._rm.release(allocation_id)
        self._finish(allocation_id, exit_code, error)

    def mark_ready(self, task_id: str) -> None:
        """The proxied task's port accepts connections (the watchdog noticed)."""
        with self._lock:
            live = self._live.get(task_id)
            if live is None or live.ready:
                return
            live.ready = True
            live.last_activity = time.monotonic()
        with self._db.write() as session:
            row = session.get(NtscTask, task_id)
            if row is not None and row.state == "RUNNING":
                row.ready = True
                row.last_activity = utcnow()
            alloc_row = session.get(Allocation, live.allocation_id)
            if alloc_row is not None:
                alloc_row.is_ready = True
            master_log(
                session,
                task_id,
                f"ready: serving at /proxy/{task_id}/",
                allocation_id=live.allocation_id,
            )

    def _finish(self, allocation_id: str, exit_code: int | None, error: str | None) -> None:
        with self._lock:
            task_id = self._by_alloc.pop(allocation_id, None)
            live = self._live.pop(task_id, None) if task_id else None
            self._tokens.pop(allocation_id, None)
        if live is None:
            return
        live.exited = True
        if live.kill_reason is not None:
            status = live.kill_reason
        elif error:
            status = f"failed: {error}"
        else:
            status = f"exited with code {exit_code}"
        now = utcnow()
        with self._db.write() as session:
            row = session.get(NtscTask, live.task_id)
            if row is not None:
                row.state = "TERMINATED"
                row.ready = False
                row.end_time = now
                row.exit_code = exit_code
                row.exit_status = status
                if row.user_session_id is not None:
                    login = session.get(UserSession, row.user_session_id)
                    if login is not None and login.revoked_at is None:
                        login.revoked_at = now
            task_row = session.get(Task, live.task_id)
            if task_row is not None:
                task_row.end_time = now
            alloc_row = session.get(Allocation, allocation_id)
            if alloc_row is not None:
                alloc_row.state = "TERMINATED"
                alloc_row.end_time = now
                alloc_row.exit_code = exit_code
                alloc_row.exit_error = error
            failed = live.kill_reason is None and (error is not None or exit_code not in (0, None))
            master_log(
                session,
                live.task_id,
                f"{live.kind.lower()} {live.task_id} ended: {status}",
                "LOG_LEVEL_ERROR" if failed else "LOG_LEVEL_INFO",
                allocation_id,
            )

    # ------------------------------------------------------------------------------------------
