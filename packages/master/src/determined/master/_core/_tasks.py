"""The tasks service: commands, TensorBoards, notebooks and shells, placed by the resource manager.

A task beyond trials (upstream's NTSC) is one process the resource manager places exactly like a
trial's (an ``AllocationRequest``, an ``Assignment``, a ``LaunchSpec``), so every RM runs them. The
service persists each task (``ntsc_tasks``, plus ``tasks`` and ``allocations`` rows so the log
routes and ``det task list`` see it), handles its allocation's events (routed here by
``AllocationEvents``), kills it on request or after its idle timeout (:mod:`._task_watch`), and
tells the reverse proxy where a proxied task listens. The task runs as its owner: it gets a login
session of that user (``DET_USER_TOKEN``), revoked when the task ends.
"""

from __future__ import annotations

import datetime
import time
import uuid
from collections.abc import Callable
from typing import Any

from sqlalchemy import select

from determined.master import _auth
from determined.master._core._config_policies import NTSC_KINDS
from determined.master._core._quotas import check_task_quota
from determined.master._core._task_logs import master_log
from determined.master._core._task_records import (
    KINDS,
    TaskSpec,
    TaskView,
    parse_duration,
    view_of,
)
from determined.master._core._task_runs import LiveTask, TaskRuns
from determined.master._core._task_watch import TaskWatchdog
from determined.master._core._work_dirs import WorkDirs
from determined.master._limits import Limits
from determined.master._task_container_defaults import with_container_defaults
from determined.master._wire import APIError
from determined.master.db import Allocation, Database, NtscTask, Task, User, UserSession, utcnow

__all__ = ["KINDS", "LiveTask", "TaskSpec", "TaskView", "Tasks"]
"""``TaskSpec`` and ``TaskView`` (from ``_task_records``) are re-exported: services of other kinds of
task (TensorBoards, notebooks) import what they need from here."""


class Tasks:
    """Start, describe and kill tasks beyond trials (one instance per master).

    The live state and the resource manager's events are :attr:`runs`' (:class:`TaskRuns`);
    readiness, idle timeouts and kill deadlines are watched by :attr:`watchdog`.
    """

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
        self.runs = TaskRuns(db, rm, work_dirs, cluster_id, master_url)
        self.watchdog = TaskWatchdog(self.runs)
        self.limits = Limits()
        """The master config's limits (the master sets them; the per-user task quota)."""
        self.config_policies: Any = None
        """The admins' config policies (``_config_policies.ConfigPolicies``; the manager sets it)."""
        self.container_defaults: Callable[[str], dict[str, Any]] = lambda pool: {}
        """A pool's ``task_container_defaults`` (the master sets it from its config)."""

    # ------------------------------------------------------------------------------------------
    # the live tasks (see TaskRuns)

    def owns(self, allocation_id: str) -> bool:
        """Whether the allocation is a live task's (its RM events come here, not to trials)."""
        return self.runs.owns(allocation_id)

    def assigned(self, request: Any, assignment: Any) -> None:
        self.runs.assigned(request, assignment)

    def started(self, allocation_id: str, pid: int) -> None:
        self.runs.started(allocation_id, pid)

    def exited(self, allocation_id: str, exit_code: int | None, error: str | None) -> None:
        self.runs.exited(allocation_id, exit_code, error)

    def live_task(self, task_id: str) -> LiveTask | None:
        """The in-memory state of a task that has not ended (a copy), else None."""
        return self.runs.live_task(task_id)

    def touch(self, task_id: str) -> None:
        """Record activity (a proxied request or WebSocket message): it defers the idle timeout."""
        self.runs.touch(task_id)

    def stop(self, task_id: str, reason: str) -> None:
        """Terminate a live task; ``reason`` becomes its exit status."""
        self.runs.stop(task_id, reason)

    # ------------------------------------------------------------------------------------------
    # reads

    def get(self, task_id: str) -> TaskView | None:
        """The stored task, or None."""
        with self._db.read() as session:
            row = session.get(NtscTask, task_id)
            if row is None:
                return None
            user = session.get(User, row.owner_id)
            return view_of(row, user.username if user else "")

    def list(self, kind: str | None = None, owner_ids: list[int] | None = None) -> list[TaskView]:
        """Stored tasks, oldest first, of one kind and some owners (None: all)."""
        stmt = select(NtscTask, User.username).join(User, User.id == NtscTask.owner_id)
        if kind is not None:
            stmt = stmt.where(NtscTask.kind == kind)
        if owner_ids is not None:
            stmt = stmt.where(NtscTask.owner_id.in_(owner_ids))
        with self._db.read() as session:
            rows = session.execute(stmt.order_by(NtscTask.start_time.asc())).all()
            return [view_of(row, username) for row, username in rows]

    def is_done(self, task_id: str) -> bool:
        """Whether the task ended (an unknown task counts as ended)."""
        view = self.get(task_id)
        return view is None or view.done

    def wait_ready(self, task_id: str, timeout: float) -> bool:
        """Block until the task is ready (True) or ended or ``timeout`` passed (False)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            view = self.get(task_id)
            if view is None or view.done:
                return False
            if view.ready:
                return True
            time.sleep(0.1)
        return False

    # ------------------------------------------------------------------------------------------
    # requests

    def start(self, spec: TaskSpec) -> TaskView:
        """Persist a new task and queue it on the resource manager; returns at once.

        Raises:
            APIError: 400 naming the field for a bad spec or a request that can never fit.
        """
        if spec.kind not in KINDS:
            raise APIError(400, f"kind: must be one of {', '.join(KINDS)}, got {spec.kind!r}")
        if not spec.argv or not all(isinstance(a, str) and a for a in spec.argv):
            raise APIError(400, "entrypoint: must be a non-empty command line")
        config = dict(spec.config or {})
        resources = config.get("resources") or {}
        if not isinstance(resources, dict):
            raise APIError(400, "resources: must be an object")
        slots = _int_field(spec.slots, resources.get("slots"), 0, "resources.slots")
        if slots < 0:
            raise APIError(400, f"resources.slots: must be >= 0, got {slots}")
        priority = _int_field(spec.priority, resources.get("priority"), 42, "resources.priority")
        if not 1 <= priority <= 99:
            raise APIError(400, f"resources.priority: must be in 1..99, got {priority}")
        pool = str(spec.resource_pool or resources.get("resource_pool") or "default")
        idle = spec.idle_timeout
        if idle is None:
            idle = parse_duration(config.get("idle_timeout"), "idle_timeout")
        problem = self._rm.validate(slots, resource_pool=pool)
        if problem:
            raise APIError(400, f"resources: {problem}")
        if self.config_policies is not None and spec.kind in NTSC_KINDS:
            asked = spec.priority if spec.priority is not None else resources.get("priority")
            self.config_policies.check_task(spec.workspace_id, slots, asked)
        config = with_container_defaults(config, self.container_defaults(pool))
        description = spec.description or str(config.get("description") or "")
        if not description:
            description = f"{spec.kind.capitalize()} ({' '.join(spec.argv)[:60]})"
        task_id = str(uuid.uuid4())
        aid = f"{task_id}.1"
        token = _auth.new_token()
        with self._db.write() as session:
            user = session.get(User, spec.owner_id)
            if user is None:
                raise APIError(400, f"owner: user {spec.owner_id} not found")
            if spec.kind != "CHECKPOINT_GC":  # the master's own work; no user's quota
                check_task_quota(session, user, self.limits)
            login = UserSession(
                user_id=user.id,
                token_hash=_auth.token_hash(token),
                expiry=utcnow() + datetime.timedelta(days=_auth.SESSION_DAYS),
            )
            session.add(login)
            session.flush()
            session.add(Task(task_id=task_id, task_type=spec.kind, job_id=f"task-{task_id}"))
            session.add(
                Allocation(
                    allocation_id=aid,
                    task_id=task_id,
                    trial_id=None,
                    state="PENDING",
                    slots=slots,
                    resource_pool=pool,
                )
            )
            row = NtscTask(
                task_id=task_id,
                allocation_id=aid,
                kind=spec.kind,
                owner_id=user.id,
                description=description,
                state="QUEUED",
                ready=False,
                argv=list(spec.argv),
                env=dict(spec.env),
                config=config,
                extra=dict(spec.extra),
                context=spec.context,
                resource_pool=pool,
                slots=slots,
                priority=priority,
                idle_timeout=idle,
                proxied=spec.proxied,
                workspace_id=spec.workspace_id,
                start_time=utcnow(),
                user_session_id=login.id,
            )
            session.add(row)
            master_log(
                session,
                task_id,
                f"{description}: waiting for {slots} slot(s)",
                allocation_id=aid,
            )
            session.flush()
            view = view_of(row, user.username)
        live = LiveTask(task_id, aid, spec.kind, spec.owner_id, spec.proxied, idle)
        self.runs.register(live, token)
        from determined.master.rm import AllocationRequest

        self._rm.submit(
            AllocationRequest(
                allocation_id=aid,
                task_id=task_id,
                job_id=f"task-{task_id}",
                slots=slots,
                priority=priority,
                resource_pool=pool,
                submitted_at=time.time(),
            )
        )
        return view

    def kill(self, task_id: str, user: User | None) -> TaskView:
        """Stop a task (owner or admin; ``user=None`` is the master itself); idempotent.

        Raises:
            APIError: 404 for an unknown task, 403 for a user who may not kill it.
        """
        view = self.get(task_id)
        if view is None:
            raise APIError(404, f"task {task_id} not found")
        if user is not None and not user.admin and user.id != view.owner_id:
            raise APIError(403, f"only the owner of task {task_id} or an admin may kill it")
        self.stop(task_id, "killed by the user" if user is not None else "killed")
        return self.get(task_id) or view

    # master lifecycle

    def set_priority(self, task_id: str, priority: Any, user: User) -> TaskView:
        """Change a task's scheduling priority (1..99; owner or admin); it applies to a task still
        waiting for slots.

        Raises:
            APIError: 400 for a bad priority, 404 for an unknown task, 403 for another user's.
        """
        if isinstance(priority, bool) or not isinstance(priority, int) or not 1 <= priority <= 99:
            raise APIError(400, f"priority: must be an integer in 1..99, got {priority!r}")
        view = self.get(task_id)
        if view is None:
            raise APIError(404, f"task {task_id} not found")
        if not user.admin and user.id != view.owner_id:
            raise APIError(403, f"only the owner of task {task_id} or an admin may change it")
        if view.done:
            raise APIError(400, f"task {task_id} has ended")
        if self.config_policies is not None and view.kind in NTSC_KINDS:
            self.config_policies.check_update(view.workspace_id, "NTSC", priority=priority)
        with self._db.write() as session:
            row = session.get(NtscTask, task_id)
            if row is not None:
                row.priority = priority
        self._rm.set_job_limits(f"task-{task_id}", priority=priority)
        return self.get(task_id) or view

    def recover(self) -> None:
        """After a restart: tasks a previous master left running end ("the master restarted");
        their process groups were reaped with the other open allocations."""
        now = utcnow()
        with self._db.write() as session:
            rows = session.scalars(select(NtscTask).where(NtscTask.state != "TERMINATED"))
            for row in rows:
                row.state = "TERMINATED"
                row.ready = False
                row.end_time = now
                row.exit_status = "the master restarted"
                if row.user_session_id is not None:
                    login = session.get(UserSession, row.user_session_id)
                    if login is not None and login.revoked_at is None:
                        login.revoked_at = now
                task_row = session.get(Task, row.task_id)
                if task_row is not None and task_row.end_time is None:
                    task_row.end_time = now
                master_log(session, row.task_id, "the master restarted; the task ended")

    def start_watchdog(self) -> None:
        """Start watching readiness, idle timeouts and kill deadlines."""
        self.watchdog.start()

    def close(self) -> None:
        """Stop the watchdog (the RM kills the processes when it closes)."""
        self.watchdog.stop()


def _int_field(explicit: int | None, configured: Any, default: int, field: str) -> int:
    value = explicit if explicit is not None else configured
    if value is None:
        return default
    if isinstance(value, bool):
        raise APIError(400, f"{field}: must be an integer, got {value!r}")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise APIError(400, f"{field}: must be an integer, got {value!r}") from None
