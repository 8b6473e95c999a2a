"""What a task beyond trials looks like from outside: its view, states and upstream's JSON shapes.

A command, TensorBoard, notebook or shell (upstream's NTSC) goes QUEUED (waiting for slots) →
STARTING (assigned, launched; a proxied task until its port accepts connections) → RUNNING →
TERMINATING (asked to stop) → TERMINATED. On the wire the states carry upstream's ``STATE_`` prefix.
"""

from __future__ import annotations

import dataclasses
import datetime
import re
from typing import Any

from determined.master._wire import APIError, ts
from determined.master.db import NtscTask

KINDS = ("COMMAND", "TENSORBOARD", "NOTEBOOK", "SHELL", "CHECKPOINT_GC")
"""The kinds of task the service runs (upstream's ``TaskType`` without its prefix); the master
starts ``CHECKPOINT_GC`` tasks itself (``_gc_tasks``), users the others."""

STATES = ("QUEUED", "STARTING", "RUNNING", "TERMINATING", "TERMINATED")
"""A task's states, in the order it passes them."""


@dataclasses.dataclass(frozen=True)
class TaskSpec:
    """What to run: the request of :meth:`determined.master._core._tasks.Tasks.start`.

    Attributes:
        kind: one of :data:`KINDS`.
        owner_id: the user the task runs as (it gets a login session of this user).
        argv: the command line; items may hold ``{port}``, ``{base_path}``, ``{task_id}`` and
            ``{work_dir}``, substituted at launch.
        config: the task's config (stored, answered as ``config``); ``resources.slots``,
            ``resources.resource_pool``, ``resources.priority``,
            ``environment.environment_variables``/``python``/``venv``, ``idle_timeout`` and
            ``description`` are read from it where the fields below are left unset.
        description: shown in lists; defaults to the config's, else the kind and command line.
        context: the context directory as a tar.gz (``_context.pack_files``), or None.
        env: extra environment variables (after the config's).
        slots: slots to hold (None: ``resources.slots``, else 0).
        resource_pool: the pool (None: ``resources.resource_pool``, else ``default``).
        priority: 1..99 (None: ``resources.priority``, else 42).
        idle_timeout: seconds without proxied traffic before the task is killed (None: the
            config's ``idle_timeout``, else never).
        proxied: whether the task serves HTTP on ``DET_TASK_PORT`` behind ``/proxy/<id>/``.
        extra: kind-specific JSON kept with the record (e.g. a TensorBoard's experiment ids).
        workspace_id: the workspace the task belongs to (RBAC checks NSC permissions there).
    """

    kind: str
    owner_id: int
    argv: list[str]
    config: dict[str, Any] = dataclasses.field(default_factory=dict)
    description: str = ""
    context: bytes | None = None
    env: dict[str, str] = dataclasses.field(default_factory=dict)
    slots: int | None = None
    resource_pool: str | None = None
    priority: int | None = None
    idle_timeout: float | None = None
    proxied: bool = False
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)
    workspace_id: int = 1


@dataclasses.dataclass(frozen=True)
class TaskView:
    """A task as stored (a detached copy; read it from any thread)."""

    task_id: str
    allocation_id: str
    kind: str
    owner_id: int
    username: str
    description: str
    state: str
    ready: bool
    config: dict[str, Any]
    extra: dict[str, Any]
    resource_pool: str
    slots: int
    priority: int
    idle_timeout: float | None
    proxied: bool
    address: str | None
    port: int | None
    start_time: datetime.datetime
    end_time: datetime.datetime | None
    last_activity: datetime.datetime | None
    exit_code: int | None
    exit_status: str | None
    workspace_id: int = 1

    @property
    def base_path(self) -> str:
        """The URL path the task is served under through the master's proxy."""
        return f"/proxy/{self.task_id}/"

    @property
    def done(self) -> bool:
        return self.state == "TERMINATED"


def view_of(row: NtscTask, username: str) -> TaskView:
    """The view of a loaded row."""
    return TaskView(
        task_id=row.task_id,
        allocation_id=row.allocation_id,
        kind=row.kind,
        owner_id=row.owner_id,
        username=username,
        description=row.description,
        state=row.state,
        ready=bool(row.ready),
        config=dict(row.config or {}),
        extra=dict(row.extra or {}),
        resource_pool=row.resource_pool,
        slots=row.slots,
        priority=row.priority,
        idle_timeout=row.idle_timeout,
        proxied=bool(row.proxied),
        address=row.address,
        port=row.port,
        start_time=row.start_time,
        end_time=row.end_time,
        last_activity=row.last_activity,
        exit_code=row.exit_code,
        exit_status=row.exit_status,
        workspace_id=int(getattr(row, "workspace_id", None) or 1),
    )


def ntsc_json(view: TaskView) -> dict[str, Any]:
    """Upstream's fields common to a Command, Notebook, Shell and Tensorboard message."""
    out: dict[str, Any] = {
        "id": view.task_id,
        "description": view.description,
        "state": f"STATE_{view.state}",
        "startTime": ts(view.start_time),
        "container": None,
        "username": view.username,
        "userId": view.owner_id,
        "displayName": view.username,
        "resourcePool": view.resource_pool,
        "exitStatus": view.exit_status or "",
        "jobId": f"task-{view.task_id}",
        "workspaceId": view.workspace_id,
        "isReady": view.ready,
        "priority": view.priority,
    }
    if view.proxied:
        out["serviceAddress"] = view.base_path
    if view.end_time is not None:
        out["endTime"] = ts(view.end_time)
    return out


def task_json(view: TaskView, allocation: dict[str, Any] | None) -> dict[str, Any]:
    """Upstream's ``Task`` message (``GET /api/v1/tasks/{id}``)."""
    out: dict[str, Any] = {
        "taskId": view.task_id,
        "taskType": f"TASK_TYPE_{view.kind}",
        "allocations": [allocation] if allocation else [],
        "startTime": ts(view.start_time),
    }
    if view.end_time is not None:
        out["endTime"] = ts(view.end_time)
    return out


_DURATION = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(ms|s|m|h|d)?\s*$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, None: 1.0}


def parse_duration(value: Any, field: str) -> float | None:
    """Seconds of a duration: a number of seconds or a string like ``"30m"``, ``"10s"``, ``"1h"``
    (upstream's duration strings); None for null or empty. A 400 naming ``field`` otherwise."""
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise APIError(400, f"{field}: must be a duration like '30m' or a number of seconds")
    if isinstance(value, (int, float)):
        seconds = float(value)
    else:
        total = 0.0
        text = str(value).strip()
        parts = re.findall(r"[0-9.]+\s*(?:ms|s|m|h|d)?", text)
        if not parts or "".join(parts).replace(" ", "") != text.replace(" ", ""):
            raise APIError(400, f"{field}: {value!r} is not a duration like '30m', '10s' or '1h'")
        for part in parts:
            match = _DURATION.match(part)
            if match is None:
                raise APIError(400, f"{field}: {value!r} is not a duration like '30m' or '10s'")
            total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        seconds = total
    if seconds <= 0:
        raise APIError(400, f"{field}: must be positive, got {value!r}")
    return seconds
