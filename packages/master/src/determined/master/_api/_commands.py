"""Commands and the generic task routes: ``/api/v1/commands...`` and ``/api/v1/tasks/...``.

A command is a task (``Tasks``) whose config's ``entrypoint`` runs once: upstream's
``LaunchCommand`` (``{config, files}`` → ``{command, config}``), ``GetCommands``, ``GetCommand``,
``KillCommand``; plus ``GetTask``, ``KillGenericTask`` (any kind of task here) and
``GetActiveTasksCount``. ``GET /api/v1/tasks`` (allocation summaries) is ``_cluster``'s, task logs
are ``_tasks``'.
"""

from __future__ import annotations

import shlex
from typing import Any

from fastapi import Depends, Request

from determined.master._api._access import (
    P,
    acting_user,
    on_task,
    task_workspace,
    visible_tasks,
)
from determined.master._api._deps import (
    Principal,
    authenticate,
    int_param,
    json_body,
    master_of,
    tasks_of,
)
from determined.master._api._json_route import api_router
from determined.master._api._ntsc_lists import in_workspaces, workspace_filter
from determined.master._core._context import ContextError, pack_files
from determined.master._core._task_records import TaskSpec, TaskView, ntsc_json, task_json
from determined.master._wire import APIError, get, pagination, ts
from determined.master.db import Allocation, User

router = api_router(tags=["Commands"])


NO_ENTRYPOINT = ["true"]
"""What a command without an ``entrypoint`` runs: nothing (it ends at once, successfully), as
upstream's command wrapper does when given no command."""


def command_argv(entrypoint: Any) -> list[str]:
    """The argv of a command's ``entrypoint``: one string (or a one-item list, what ``det cmd run
    'a b'`` sends) runs through ``sh -c``; a list of several items runs as it is; none (absent,
    ``null`` or ``[]``) runs nothing, as upstream accepts a command config without one."""
    if entrypoint is None or entrypoint == []:
        return list(NO_ENTRYPOINT)
    if isinstance(entrypoint, str):
        if not entrypoint.strip():
            raise APIError(400, "config.entrypoint: must not be empty")
        return ["sh", "-c", entrypoint]
    if not isinstance(entrypoint, list) or not entrypoint:
        raise APIError(400, "config.entrypoint: must be a command string or a list")
    items = [str(x) for x in entrypoint]
    if len(items) == 1:
        return ["sh", "-c", items[0]]
    return items


def context_of(body: dict[str, Any], max_bytes: int) -> bytes | None:
    """The uploaded ``files`` (upstream ``File`` objects) packed as a tarball; 400 when bad or
    over ``max_bytes`` (``limits.max_context_bytes``)."""
    files = body.get("files") or []
    if not isinstance(files, list):
        raise APIError(400, "files: must be a list of files")
    try:
        return pack_files(files, max_bytes)
    except ContextError as e:
        raise APIError(400, f"files: {e}") from None


def config_of(body: dict[str, Any]) -> dict[str, Any]:
    """The request's ``config`` object (400 when it is not one)."""
    config = body.get("config") or {}
    if not isinstance(config, dict):
        raise APIError(400, "config: must be an object")
    return dict(config)


def owner_filter(request: Request) -> list[int] | None:
    """The owners named by ``users`` (usernames) and ``userIds`` query parameters (None: all)."""
    q = request.query_params
    names = [n for value in q.getlist("users") for n in value.split(",") if n]
    ids = [int_param(v, "userIds") or 0 for v in q.getlist("userIds")]
    if not names and not ids:
        return None
    from sqlalchemy import select

    if names:
        with master_of(request).db.read() as session:
            ids += list(session.scalars(select(User.id).where(User.username.in_(names))))
    return ids


def page(request: Request, items: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], Any]:
    """``offset``/``limit`` of the query applied to ``items``, and upstream's pagination."""
    q = request.query_params
    offset = int_param(q.get("offset"), "offset", 0) or 0
    limit = int_param(q.get("limit"), "limit", 0) or 0
    total = len(items)
    start = max(0, total + offset) if offset < 0 else min(offset, total)
    end = total if not limit else min(total, start + limit)
    return items[start:end], pagination(start, limit, end - start, total)


def sort_views(request: Request, views: list[TaskView]) -> list[TaskView]:
    """``sortBy`` (``SORT_BY_ID``/``DESCRIPTION``/``START_TIME``) and ``orderBy``."""
    q = request.query_params
    key = {
        "SORT_BY_ID": lambda v: v.task_id,
        "SORT_BY_DESCRIPTION": lambda v: v.description,
    }.get(str(q.get("sortBy") or ""), lambda v: v.start_time)
    return sorted(views, key=key, reverse=q.get("orderBy") == "ORDER_BY_DESC")


def owned(view: TaskView | None, task_id: str, kind: str | None = None) -> TaskView:
    """The view, or a 404 naming the task (also when it is of another kind)."""
    if view is None or (kind is not None and view.kind != kind):
        what = (kind or "task").lower()
        raise APIError(404, f"{what} {task_id} not found")
    return view


def task_allocation_json(request: Request, view: TaskView) -> dict[str, Any] | None:
    """Upstream's ``Allocation`` message of the task's allocation."""
    with master_of(request).db.read() as session:
        row = session.get(Allocation, view.allocation_id)
        if row is None:
            return None
        out: dict[str, Any] = {
            "taskId": view.task_id,
            "allocationId": row.allocation_id,
            "state": f"STATE_{view.state}",
            "isReady": view.ready,
            "slots": row.slots,
            "startTime": ts(row.start_time),
            "endTime": ts(row.end_time),
        }
        if view.exit_status:
            out["exitReason"] = view.exit_status
        if row.exit_code is not None:
            out["statusCode"] = row.exit_code
        return out


# ---- commands -------------------------------------------------------------------------------------


@router.post("/api/v1/commands")
def launch_command(
    request: Request,
    body: dict[str, Any] = Depends(json_body),
    p: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """Run ``config.entrypoint`` once with the uploaded ``files`` as its working directory."""
    if get(body, "template_name"):
        raise APIError(400, "templateName: templates are not supported by det-master")
    workspace_id = task_workspace(request, p, body)
    config = config_of(body)
    argv = command_argv(config.get("entrypoint"))
    description = str(config.get("description") or "")
    if not description:
        shown = argv[2] if argv[:2] == ["sh", "-c"] else shlex.join(argv)
        if config.get("entrypoint") in (None, []):
            shown = "no entrypoint"
        description = f"Command ({shown[:60]})"
        config["description"] = description
    view = tasks_of(request).start(
        TaskSpec(
            kind="COMMAND",
            owner_id=p.user.id,
            argv=argv,
            config=config,
            description=description,
            context=context_of(body, master_of(request).config.limits_config().max_context_bytes),
            workspace_id=workspace_id,
        )
    )
    return {"command": ntsc_json(view), "config": view.config}


@router.get("/api/v1/commands")
def get_commands(request: Request, p: Principal = Depends(authenticate)) -> dict[str, Any]:
    """Commands, oldest first (``users``/``userIds`` filter by owner, ``workspaceId`` by
    workspace); not those of a deleted workspace."""
    ws = workspace_filter(request, p)
    views = tasks_of(request).list("COMMAND", owner_filter(request))
    views = visible_tasks(request, p, in_workspaces(request, views, ws))
    items, pages = page(request, [ntsc_json(v) for v in sort_views(request, views)])
    return {"commands": items, "pagination": pages}


@router.get("/api/v1/commands/{command_id}", dependencies=[on_task(P.VIEW_NSC, "command_id")])
def get_command(request: Request, command_id: str, p: Principal = Depends(authenticate)) -> Any:
    """One command and its config."""
    view = owned(tasks_of(request).get(command_id), command_id, "COMMAND")
    return {"command": ntsc_json(view), "config": view.config}


@router.post(
    "/api/v1/commands/{command_id}/kill", dependencies=[on_task(P.UPDATE_NSC, "command_id")]
)
def kill_command(request: Request, command_id: str, p: Principal = Depends(authenticate)) -> Any:
    """Stop a command (its owner or an admin)."""
    tasks = tasks_of(request)
    owned(tasks.get(command_id), command_id, "COMMAND")
    return {
        "command": ntsc_json(tasks.kill(command_id, acting_user(request, p, task_id=command_id)))
    }


@router.post(
    "/api/v1/commands/{command_id}/set_priority",
    dependencies=[on_task(P.UPDATE_NSC, "command_id")],
)
def set_command_priority(
    request: Request,
    command_id: str,
    body: dict[str, Any] = Depends(json_body),
    p: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """Change a command's priority (``{"priority": 1..99}``; matters while it waits for slots)."""
    tasks = tasks_of(request)
    owned(tasks.get(command_id), command_id, "COMMAND")
    view = tasks.set_priority(
        command_id, body.get("priority"), acting_user(request, p, task_id=command_id)
    )
    return {"command": ntsc_json(view)}


# ---- generic task routes ----------------------------------------------------------------------------


@router.get("/api/v1/tasks/count")
def active_tasks_count(request: Request, p: Principal = Depends(authenticate)) -> dict[str, int]:
    """How many tasks of each kind have not ended."""
    counts = {"COMMAND": 0, "NOTEBOOK": 0, "SHELL": 0, "TENSORBOARD": 0}
    for view in visible_tasks(request, p, tasks_of(request).list()):
        if not view.done:
            counts[view.kind] = counts.get(view.kind, 0) + 1
    return {
        "commands": counts["COMMAND"],
        "notebooks": counts["NOTEBOOK"],
        "shells": counts["SHELL"],
        "tensorboards": counts["TENSORBOARD"],
    }


@router.get("/api/v1/tasks/{task_id}", dependencies=[on_task(P.VIEW_NSC)])
def get_task(request: Request, task_id: str, p: Principal = Depends(authenticate)) -> Any:
    """A command, TensorBoard, notebook or shell as upstream's ``Task`` (trials: their task id)."""
    view = tasks_of(request).get(task_id)
    if view is None:
        return {"task": trial_task_json(request, task_id)}
    return {"task": task_json(view, task_allocation_json(request, view))}


@router.post("/api/v1/tasks/{task_id}/kill", dependencies=[on_task(P.UPDATE_NSC)])
def kill_task(request: Request, task_id: str, p: Principal = Depends(authenticate)) -> Any:
    """Stop a command, TensorBoard, notebook or shell (its owner or an admin)."""
    tasks_of(request).kill(task_id, acting_user(request, p, task_id=task_id))
    return {}


def trial_task_json(request: Request, task_id: str) -> dict[str, Any]:
    """A trial's task as upstream's ``Task`` message; 404 when there is no such task."""
    from sqlalchemy import select

    from determined.master.db import Task

    with master_of(request).db.read() as session:
        task = session.get(Task, task_id)
        if task is None:
            raise APIError(404, f"task {task_id} not found")
        allocs = list(session.scalars(select(Allocation).where(Allocation.task_id == task_id)))
        return {
            "taskId": task.task_id,
            "taskType": f"TASK_TYPE_{task.task_type}",
            "allocations": [
                {
                    "taskId": task_id,
                    "allocationId": a.allocation_id,
                    "state": f"STATE_{a.state if a.state != 'PENDING' else 'QUEUED'}",
                    "isReady": bool(a.is_ready),
                    "slots": a.slots,
                    "startTime": ts(a.start_time),
                    "endTime": ts(a.end_time),
                }
                for a in allocs
            ],
            "startTime": ts(task.start_time),
            "endTime": ts(task.end_time),
        }
