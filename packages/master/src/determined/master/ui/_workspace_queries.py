"""The UI's reads of workspaces and projects: lists with counts, and where an experiment lives.

Visibility is a set of workspace ids (``None``: every workspace, for admins or RBAC off), as
:meth:`determined.master._core._authz.Authz.visible_workspace_ids` answers it. Whatever lies
outside it is answered as missing (404), never as forbidden: a user outside a workspace does not
learn that it exists.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Sequence
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from determined.master._wire import APIError
from determined.master.db import Experiment, Project, User, Workspace

HIDDEN_STATES = ("DELETED", "DELETING")


@dataclasses.dataclass
class Location:
    """The workspace and project an experiment belongs to (for breadcrumbs and the list)."""

    workspace_id: int
    workspace: str
    project_id: int
    project: str


def visible_to(visible: Collection[int] | None, workspace_id: int | None) -> bool:
    """Whether a workspace is in ``visible`` (``None`` = all)."""
    return workspace_id is not None and (visible is None or workspace_id in visible)


def list_workspaces(
    session: Session, visible: Collection[int] | None, include_archived: bool = False
) -> list[dict[str, Any]]:
    """The workspaces the user sees, with their numbers of projects and experiments: three
    queries whatever their number."""
    stmt = select(Workspace, User.username).outerjoin(User, User.id == Workspace.user_id)
    if visible is not None:
        stmt = stmt.where(Workspace.id.in_(list(visible)))
    if not include_archived:
        stmt = stmt.where(Workspace.archived.is_(False))
    rows = list(session.execute(stmt.order_by(Workspace.id)))
    ids = [w.id for w, _ in rows]
    projects: dict[int, int] = {}
    experiments: dict[int, int] = {}
    if ids:
        projects = {
            ws: int(n)
            for ws, n in session.execute(
                select(Project.workspace_id, func.count(Project.id))
                .where(Project.workspace_id.in_(ids))
                .group_by(Project.workspace_id)
            )
        }
        experiments = {
            ws: int(n)
            for ws, n in session.execute(
                select(Project.workspace_id, func.count(Experiment.id))
                .join(Experiment, Experiment.project_id == Project.id)
                .where(Project.workspace_id.in_(ids), Experiment.state.notin_(HIDDEN_STATES))
                .group_by(Project.workspace_id)
            )
        }
    return [
        {
            "workspace": w,
            "owner": owner or "",
            "projects": projects.get(w.id, 0),
            "experiments": experiments.get(w.id, 0),
        }
        for w, owner in rows
    ]


def get_workspace(
    session: Session, workspace_id: int, visible: Collection[int] | None
) -> Workspace:
    """A workspace the user sees; 404 otherwise (missing and invisible look the same)."""
    workspace = session.get(Workspace, workspace_id)
    if workspace is None or not visible_to(visible, workspace.id):
        raise APIError(404, f"workspace {workspace_id} not found")
    return workspace


def workspace_projects(
    session: Session, workspace_id: int, include_archived: bool = False
) -> list[dict[str, Any]]:
    """The projects of a workspace with their numbers of experiments: two queries."""
    stmt = (
        select(Project, User.username)
        .outerjoin(User, User.id == Project.user_id)
        .where(Project.workspace_id == workspace_id)
    )
    if not include_archived:
        stmt = stmt.where(Project.archived.is_(False))
    rows = list(session.execute(stmt.order_by(Project.id)))
    counts = {
        pid: int(n)
        for pid, n in session.execute(
            select(Experiment.project_id, func.count(Experiment.id))
            .where(
                Experiment.project_id.in_([p.id for p, _ in rows]),
                Experiment.state.notin_(HIDDEN_STATES),
            )
            .group_by(Experiment.project_id)
        )
    }
    return [
        {"project": p, "owner": owner or "", "experiments": counts.get(p.id, 0)}
        for p, owner in rows
    ]


def get_project(
    session: Session, project_id: int, visible: Collection[int] | None
) -> tuple[Project, Workspace]:
    """A project the user sees and its workspace; 404 otherwise."""
    row = session.execute(
        select(Project, Workspace)
        .join(Workspace, Workspace.id == Project.workspace_id)
        .where(Project.id == project_id)
    ).first()
    if row is None or not visible_to(visible, row[1].id):
        raise APIError(404, f"project {project_id} not found")
    return row[0], row[1]


def locations(session: Session, project_ids: Collection[int]) -> dict[int, Location]:
    """project id -> its :class:`Location`, one query for all of them."""
    if not project_ids:
        return {}
    rows = session.execute(
        select(Project.id, Project.name, Workspace.id, Workspace.name)
        .join(Workspace, Workspace.id == Project.workspace_id)
        .where(Project.id.in_(list(set(project_ids))))
    )
    return {pid: Location(wid, wname, pid, pname) for pid, pname, wid, wname in rows}


def location_of(session: Session, project_id: int) -> Location | None:
    """Where one project is (None for a project that no longer exists)."""
    return locations(session, [project_id]).get(project_id)


def require_visible_experiment(
    session: Session, exp: Experiment, visible: Collection[int] | None, what: str
) -> Location | None:
    """The experiment's location; 404 naming ``what`` (e.g. ``trial 7``) when the user cannot
    see its workspace."""
    where = location_of(session, exp.project_id)
    if visible is not None and (where is None or where.workspace_id not in visible):
        raise APIError(404, f"{what} not found")
    return where


def fill_locations(session: Session, rows: Sequence[Any]) -> None:
    """Set ``location`` on rows that have a ``project_id`` (one query)."""
    where = locations(session, [r.project_id for r in rows])
    for row in rows:
        row.location = where.get(row.project_id)
