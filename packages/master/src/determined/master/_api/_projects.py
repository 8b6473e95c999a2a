"""Project routes (upstream's ``/api/v1/projects/...``): create, get, patch, delete, archive, move,
notes, columns, and moving experiments between projects."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from fastapi import Depends, Request
from sqlalchemy import select

from determined.master._api._access import (
    P,
    require_experiment,
    require_project,
    require_workspace,
)
from determined.master._api._deps import (
    Principal,
    authenticate,
    authz_of,
    int_param,
    json_body,
    master_of,
)
from determined.master._api._json_route import api_router
from determined.master._core._project_columns import project_columns
from determined.master._core._projects import ProjectFields, Projects, find_project
from determined.master._wire import APIError, get
from determined.master.db import Project, Workspace

router = api_router(tags=["Projects"])


def projects_of(request: Request) -> Projects:
    """The projects service."""
    return master_of(request).manager.projects


def _text(body: dict[str, Any], name: str, field: str, *, required: bool = False) -> str | None:
    value = get(body, name)
    if isinstance(value, dict) and "value" in value:  # a protobuf StringValue wrapper
        value = value["value"]
    if value is None:
        if required:
            raise APIError(400, f"{field}: required")
        return None
    if not isinstance(value, str):
        raise APIError(400, f"{field}: must be a string, got {type(value).__name__}")
    return value


def _notes(value: Any, field: str) -> list[dict[str, str]]:
    if not isinstance(value, list):
        raise APIError(400, f"{field}: must be a list of notes ({{name, contents}})")
    notes = []
    for i, note in enumerate(value):
        if not isinstance(note, dict):
            raise APIError(400, f"{field}[{i}]: must be an object with name and contents")
        name, contents = note.get("name"), note.get("contents", "")
        if not isinstance(name, str):
            raise APIError(400, f"{field}[{i}].name: required, a string")
        if not isinstance(contents, str):
            raise APIError(400, f"{field}[{i}].contents: must be a string")
        notes.append({"name": name, "contents": contents})
    return notes


def _check_owner(request: Request, principal: Principal, project_id: int, action: str) -> None:
    """Basic authorization's rule (RBAC off): only an admin, the project's owner or its
    workspace's owner may rename, archive, unarchive or delete a project; only an admin or the
    project's owner may move it (403). 404 for no project. Editing the default project is
    refused by the service first (a 400, as upstream)."""
    with master_of(request).db.read() as session:
        project = find_project(session, project_id)
        if action == "edit" and project.immutable:
            return
        owners = [project.user_id]
        if action != "move":
            owners.append(
                session.scalar(
                    select(Workspace.user_id).where(Workspace.id == project.workspace_id)
                )
            )
    authz_of(request).check_owner(principal, owners, f"{action} project {project_id}")


def _deleter(request: Request, principal: Principal, project_id: int) -> Any:
    """Who deletes, for the "creator or admin" rule of the projects service (and of deleting each
    experiment): with RBAC on, a WorkspaceAdmin of the project's workspace counts as an admin."""
    authz = authz_of(request)
    ws = authz.workspace_of_project(project_id)
    if not authz.enabled or principal.user.admin or ws is None:
        return principal.user
    if not authz.can(principal, P.UPDATE_WORKSPACE, ws):
        return principal.user
    user = principal.user
    return SimpleNamespace(id=user.id, username=user.username, admin=True)


@router.post("/api/v1/workspaces/{workspace_id}/projects")
def post_project(
    request: Request,
    workspace_id: int,
    body: dict[str, Any] = Depends(json_body),
    principal: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """Create a project in a workspace (``name``, ``description``, ``key``)."""
    in_body = int_param(get(body, "workspace_id"), "workspaceId")
    if in_body not in (None, 0, workspace_id):
        raise APIError(400, f"workspaceId: {in_body} differs from the path's {workspace_id}")
    name = _text(body, "name", "name", required=True)
    assert name is not None
    require_workspace(request, principal, workspace_id, P.CREATE_PROJECT)
    project = projects_of(request).create(
        workspace_id,
        name,
        principal.user,
        description=_text(body, "description", "description") or "",
        key=_text(body, "key", "key") or None,
    )
    return {"project": project}


@router.get("/api/v1/projects/key/{key}")
def get_project_by_key(
    request: Request, key: str, principal: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """The project with this key (case-insensitive)."""

    with master_of(request).db.read() as session:
        project_id = session.scalar(select(Project.id).where(Project.key == key.upper()))
    if project_id is None:
        raise APIError(404, f"project with key {key!r} not found")
    require_project(request, principal, int(project_id), P.VIEW_PROJECT)
    return {"project": projects_of(request).get(int(project_id))}


@router.get("/api/v1/projects/{project_id}")
def get_project(
    request: Request, project_id: int, principal: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """One project with its experiment counts and notes."""
    require_project(request, principal, project_id, P.VIEW_PROJECT)
    return {"project": projects_of(request).get(project_id)}


@router.patch("/api/v1/projects/{project_id}")
def patch_project(
    request: Request,
    project_id: int,
    body: dict[str, Any] = Depends(json_body),
    principal: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """Change a project's ``name``, ``description`` or ``key`` (the body is the patch itself, as
    upstream's ``body: "project"``; a ``project`` wrapper is accepted too)."""
    require_project(request, principal, project_id, P.UPDATE_PROJECT)
    wrapped = body.get("project")
    patch: dict[str, Any] = wrapped if isinstance(wrapped, dict) else body
    fields = ProjectFields(
        name=_text(patch, "name", "project.name"),
        description=_text(patch, "description", "project.description"),
        key=_text(patch, "key", "project.key"),
    )
    if (fields.name, fields.description, fields.key) != (None, None, None):
        _check_owner(request, principal, project_id, "edit")
    return {"project": projects_of(request).patch(project_id, fields)}


@router.delete("/api/v1/projects/{project_id}")
def delete_project(
    request: Request, project_id: int, principal: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """Delete a project and its (finished) experiments; ``completed`` is true when done."""
    require_project(request, principal, project_id, P.DELETE_PROJECT)
    _check_owner(request, principal, project_id, "delete")
    projects_of(request).delete(project_id, _deleter(request, principal, project_id))
    return {"completed": True}


@router.post("/api/v1/projects/{project_id}/archive")
def archive_project(
    request: Request, project_id: int, principal: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """Archive a project: it takes no new experiments until unarchived."""
    require_project(request, principal, project_id, P.UPDATE_PROJECT)
    _check_owner(request, principal, project_id, "archive")
    projects_of(request).set_archived(project_id, True)
    return {}


@router.post("/api/v1/projects/{project_id}/unarchive")
def unarchive_project(
    request: Request, project_id: int, principal: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """Unarchive a project."""
    require_project(request, principal, project_id, P.UPDATE_PROJECT)
    _check_owner(request, principal, project_id, "unarchive")
    projects_of(request).set_archived(project_id, False)
    return {}


@router.post("/api/v1/projects/{project_id}/move")
def move_project(
    request: Request,
    project_id: int,
    body: dict[str, Any] = Depends(json_body),
    principal: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """Move a project to another workspace (``destinationWorkspaceId``)."""
    target = int_param(get(body, "destination_workspace_id"), "destinationWorkspaceId")
    if target is None:
        raise APIError(400, "destinationWorkspaceId: required")
    require_project(request, principal, project_id, P.DELETE_PROJECT)
    require_workspace(request, principal, target, P.CREATE_PROJECT)
    _check_owner(request, principal, project_id, "move")
    projects_of(request).move(project_id, target)
    return {}


@router.post("/api/v1/projects/{project_id}/notes")
def add_project_note(
    request: Request,
    project_id: int,
    body: dict[str, Any] = Depends(json_body),
    principal: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """Append a note (``{name, contents}``, upstream's body is the note itself): ``notes``."""
    require_project(request, principal, project_id, P.UPDATE_PROJECT)
    note = body.get("note") if isinstance(body.get("note"), dict) else body
    (parsed,) = _notes([note], "note")
    return {"notes": projects_of(request).add_note(project_id, parsed["name"], parsed["contents"])}


@router.put("/api/v1/projects/{project_id}/notes")
def put_project_notes(
    request: Request,
    project_id: int,
    body: dict[str, Any] = Depends(json_body),
    principal: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """Replace a project's notes (``notes``): the notes as stored."""
    require_project(request, principal, project_id, P.UPDATE_PROJECT)
    in_body = int_param(get(body, "project_id"), "projectId")
    if in_body not in (None, 0, project_id):
        raise APIError(400, f"projectId: {in_body} differs from the path's {project_id}")
    if get(body, "notes") is None:
        raise APIError(400, "notes: required (a list of {name, contents})")
    notes = _notes(get(body, "notes"), "notes")
    return {"notes": projects_of(request).put_notes(project_id, notes)}


@router.get("/api/v1/projects/{project_id}/columns")
def get_project_columns(
    request: Request, project_id: int, principal: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """The columns of the project's experiment table (fixed, ``hp.*``, metrics)."""
    require_project(request, principal, project_id, P.VIEW_PROJECT)
    with master_of(request).db.read() as session:
        find_project(session, project_id)
        return {"columns": project_columns(session, project_id)}


@router.post("/api/v1/experiments/{experiment_id}/move")
def move_experiment(
    request: Request,
    experiment_id: int,
    body: dict[str, Any] = Depends(json_body),
    principal: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """Move one experiment to another project (``destinationProjectId``)."""
    target = int_param(get(body, "destination_project_id"), "destinationProjectId")
    if target is None:
        raise APIError(400, "destinationProjectId: required")
    require_experiment(request, principal, experiment_id, P.UPDATE_EXPERIMENT, own_ok=False)
    require_project(request, principal, target, P.CREATE_EXPERIMENT)
    projects = projects_of(request)
    (result,) = projects.move_experiments([experiment_id], target)
    if result["error"]:
        raise APIError(400, result["error"])
    return {}


@router.post("/api/v1/projects/{project_id}/experiments/move")
def move_experiments(
    request: Request,
    project_id: int,
    body: dict[str, Any] = Depends(json_body),
    principal: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """Move several experiments (``experimentIds``) to ``destinationProjectId``: one result each
    (``{id, error}``)."""
    target = int_param(get(body, "destination_project_id"), "destinationProjectId")
    if target is None:
        raise APIError(400, "destinationProjectId: required")
    raw = get(body, "experiment_ids")
    if not isinstance(raw, list) or not raw:
        raise APIError(400, "experimentIds: required, a non-empty list of experiment ids")
    ids = [i for i in (int_param(x, "experimentIds") for x in raw) if i is not None]
    require_project(request, principal, project_id, P.VIEW_PROJECT)
    require_project(request, principal, target, P.CREATE_EXPERIMENT)
    refused: dict[int, str] = {}
    for exp_id in ids:
        try:
            require_experiment(request, principal, exp_id, P.UPDATE_EXPERIMENT, own_ok=False)
        except APIError as e:
            refused[exp_id] = e.message
    allowed = [i for i in ids if i not in refused]
    moved = {r["id"]: r for r in projects_of(request).move_experiments(allowed, target, project_id)}
    results = [moved.get(i) or {"id": i, "error": refused[i]} for i in ids]
    return {"results": results}
