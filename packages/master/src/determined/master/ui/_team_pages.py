"""The UI's workspace and project pages: workspaces → a workspace's projects → a project's
experiments (the experiment list filtered by project, with the project's notes).

Only what the signed-in user can see is listed; a workspace or project outside the user's
workspaces answers 404 as a missing one does. Forms to create a workspace or a project appear for
users whose roles allow it, and post to the REST API (which checks again).
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from determined.master._api._deps import Principal, master_of
from determined.master._core._authz import Permission
from determined.master.ui import _access, _workspace_queries
from determined.master.ui._pages import _int_id, _page, list_context
from determined.master.ui._render import render

router = APIRouter(include_in_schema=False)


def _archived(request: Request) -> bool:
    return request.query_params.get("archived") in ("1", "true", "on", "yes")


@router.get("/workspaces")
def workspaces(request: Request) -> Response:
    """The workspaces the user can see, with their numbers of projects and experiments."""

    def build(p: Principal) -> Response:
        archived = _archived(request)
        visible = _access.visible_workspaces(request, p, Permission.VIEW_WORKSPACE)
        with master_of(request).db.read() as session:
            rows = _workspace_queries.list_workspaces(session, visible, archived)
        return render(
            "workspaces.html",
            user=p.user,
            workspaces=rows,
            archived=archived,
            can_create=_access.can_create_workspace(request, p),
        )

    return _page(request, build)


@router.get("/workspaces/{workspace_id}")
def workspace(request: Request, workspace_id: str) -> Response:
    """A workspace: its projects with their numbers of experiments."""

    def build(p: Principal) -> Response:
        ws_id = _int_id(workspace_id, "workspace")
        archived = _archived(request)
        visible = _access.visible_workspaces(request, p, Permission.VIEW_WORKSPACE)
        with master_of(request).db.read() as session:
            found = _workspace_queries.get_workspace(session, ws_id, visible)
            projects = _workspace_queries.workspace_projects(session, ws_id, archived)
        return render(
            "workspace.html",
            user=p.user,
            workspace=found,
            projects=projects,
            archived=archived,
            can=_access.allowed(request, p, ws_id),
        )

    return _page(request, build)


@router.get("/projects/{project_id}")
def project(request: Request, project_id: str) -> Response:
    """A project: its notes and its experiments (the experiment list, filtered by project)."""

    def build(p: Principal) -> Response:
        pid = _int_id(project_id, "project")
        visible = _access.visible_workspaces(request, p, Permission.VIEW_PROJECT)
        with master_of(request).db.read() as session:
            found, ws = _workspace_queries.get_project(session, pid, visible)
        notes = [n for n in (found.notes or []) if isinstance(n, dict)]
        return render(
            "project.html",
            user=p.user,
            project=found,
            workspace=ws,
            notes=notes,
            can=_access.allowed(request, p, ws.id),
            **list_context(request, p, project=pid),
        )

    return _page(request, build)
