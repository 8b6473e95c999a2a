"""Notebook routes: upstream's ``/api/v1/notebooks`` (launch, list, get, kill, report_idle)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import Depends, Request

from determined.master._api._access import (
    P,
    acting_user,
    on_task,
    task_workspace,
)
from determined.master._api._deps import (
    Principal,
    authenticate,
    json_body,
    master_of,
    notebooks_of,
)
from determined.master._api._json_route import api_router
from determined.master._api._ntsc_lists import list_tasks
from determined.master._core._context import ContextError, pack_files
from determined.master._core._notebooks import NotebookLaunch, notebook_config, service_address
from determined.master._core._task_records import ntsc_json
from determined.master._wire import APIError, get

if TYPE_CHECKING:
    from determined.master._core._tasks import TaskView

router = api_router(tags=["Notebooks"])


def notebook_json(view: TaskView) -> dict[str, Any]:
    """Upstream's ``Notebook`` message."""
    return {**ntsc_json(view), "serviceAddress": service_address(view)}


@router.post("/api/v1/notebooks")
def launch_notebook(
    request: Request,
    body: dict[str, Any] = Depends(json_body),
    principal: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """Start JupyterLab with the uploaded ``files`` as its working directory; answers
    ``notebook``, ``config``, ``warnings`` (``preview``: only the config it would run with)."""
    config = get(body, "config") or {}
    if not isinstance(config, dict):
        raise APIError(400, "config: must be an object")
    if get(body, "template_name"):
        raise APIError(400, "templateName: det has no config templates")
    files = get(body, "files") or []
    if not isinstance(files, list):
        raise APIError(400, "files: must be a list of files")
    if get(body, "preview"):
        full = notebook_config(config)
        return {"notebook": _preview_json(full, principal), "config": full, "warnings": []}
    try:
        context = pack_files(files, master_of(request).config.limits_config().max_context_bytes)
    except ContextError as exc:
        raise APIError(400, f"files: {exc}") from None
    launch = NotebookLaunch(
        config=config, context=context, workspace_id=task_workspace(request, principal, body)
    )
    view = notebooks_of(request).launch(principal.user, launch)
    return {"notebook": notebook_json(view), "config": view.config, "warnings": []}


def _preview_json(config: dict[str, Any], principal: Principal) -> dict[str, Any]:
    """The zero-valued ``Notebook`` upstream answers a preview with (required fields set)."""
    return {
        "id": "",
        "description": str(config.get("description") or ""),
        "state": "STATE_UNSPECIFIED",
        "startTime": "1970-01-01T00:00:00Z",
        "username": principal.user.username,
        "userId": principal.user.id,
        "displayName": principal.user.username,
        "resourcePool": str((config.get("resources") or {}).get("resource_pool") or "default"),
        "jobId": "",
        "workspaceId": 1,
    }


@router.get("/api/v1/notebooks")
def get_notebooks(request: Request, principal: Principal = Depends(authenticate)) -> dict[str, Any]:
    """Notebooks (filters ``users``/``userIds``, ``sortBy``, ``orderBy``, ``offset``, ``limit``),
    with ``pagination``."""
    return list_tasks(request, principal, "notebooks", notebooks_of(request).list, notebook_json)


@router.get("/api/v1/notebooks/{notebook_id}", dependencies=[on_task(P.VIEW_NSC, "notebook_id")])
def get_notebook(
    request: Request, notebook_id: str, principal: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """One notebook: ``notebook`` and its ``config``."""
    view = notebooks_of(request).get(notebook_id)
    return {"notebook": notebook_json(view), "config": view.config}


@router.post(
    "/api/v1/notebooks/{notebook_id}/kill", dependencies=[on_task(P.UPDATE_NSC, "notebook_id")]
)
def kill_notebook(
    request: Request, notebook_id: str, principal: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """Stop a notebook (its owner or an admin)."""
    view = notebooks_of(request).kill(
        notebook_id, acting_user(request, principal, task_id=notebook_id)
    )
    return {"notebook": notebook_json(view)}


@router.put(
    "/api/v1/notebooks/{notebook_id}/report_idle",
    dependencies=[on_task(P.UPDATE_NSC, "notebook_id")],
)
def report_notebook_idle(
    request: Request,
    notebook_id: str,
    body: dict[str, Any] = Depends(json_body),
    principal: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """A notebook says whether it is idle; ``idle: false`` defers its idle timeout."""
    idle = get(body, "idle")
    if not isinstance(idle, bool):
        raise APIError(400, "idle: must be a boolean")
    notebooks_of(request).report_idle(
        notebook_id, idle, acting_user(request, principal, task_id=notebook_id)
    )
    return {}
