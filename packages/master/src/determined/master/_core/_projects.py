"""The projects service: named collections of experiments inside a workspace, with notes.

Values arrive parsed and type-checked by the API edge; this service enforces what needs the
database, as upstream does: names unique within a workspace, keys (1-5 letters or digits) unique
on the master, the default project (``Uncategorized``, immutable) never renamed, archived, moved or
deleted, nothing added to an archived project or moved out of one, no change to a project of an
archived workspace, and a project deleted only with every experiment in it finished.
"""

from __future__ import annotations

import dataclasses
import random
import re
import string
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import bindparam, func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from determined.master._core._workspaces import name_order_key
from determined.master._wire import TERMINAL_STATES, APIError, ts
from determined.master.db import (
    Checkpoint,
    Database,
    Experiment,
    Project,
    Run,
    User,
    Workspace,
    core_rows,
    registered_versions,
    utcnow,
)

DEFAULT_PROJECT_ID = 1
"""The ``Uncategorized`` project of the ``Uncategorized`` workspace: experiments land there."""
MAX_KEY_LENGTH = 5
KEY_PREFIX_LENGTH = 3
_KEY_PATTERN = re.compile(r"^[A-Za-z0-9]{1,5}$")
_ACTIVE_STATES = ("ACTIVE", "PAUSED", "STOPPING_COMPLETED", "STOPPING_CANCELED", "STOPPING_KILLED")


@dataclasses.dataclass(frozen=True)
class ProjectFields:
    """A project's editable fields (None in a change: leave as is)."""

    name: str | None = None
    description: str | None = None
    key: str | None = None


def check_key(key: str, field: str = "key") -> str:
    """``key`` upper-cased when it is 1-5 letters or digits; 400 naming ``field`` otherwise."""
    if len(key) > MAX_KEY_LENGTH:
        raise APIError(
            400, f"{field}: project key cannot be longer than {MAX_KEY_LENGTH} characters"
        )
    if not key:
        raise APIError(400, f"{field}: project key cannot be empty")
    if not _KEY_PATTERN.match(key):
        raise APIError(400, f"{field}: project key can only contain alphanumeric characters: {key}")
    return key.upper()


def check_name(name: str, field: str = "name") -> str:
    """A project name: not blank, at most 255 characters; 400 naming ``field`` otherwise."""
    if not name.strip():
        raise APIError(400, f"{field}: a project name cannot be empty")
    if len(name) > 255:
        raise APIError(400, f"{field}: a project name is at most 255 characters")
    return name


def find_project(session: Session, project_id: int) -> Project:
    """The project with this id; 404 otherwise."""
    project = session.get(Project, project_id)
    if project is None:
        raise APIError(404, f"project {project_id} not found")
    return project


def find_workspace(session: Session, workspace_id: int, field: str = "workspaceId") -> Workspace:
    """The workspace with this id; 404 naming ``field`` otherwise."""
    workspace = session.get(Workspace, workspace_id)
    if workspace is None:
        raise APIError(404, f"{field}: workspace {workspace_id} not found")
    return workspace


def _workspace_unarchived(session: Session, project: Project) -> Workspace:
    workspace = find_workspace(session, project.workspace_id)
    if workspace.archived:
        raise APIError(
            400,
            f"project {project.id} belongs to an archived workspace; "
            "to make changes, first unarchive the workspace",
        )
    return workspace


def _name_free(
    session: Session, workspace_id: int, name: str, field: str, exclude_id: int | None = None
) -> None:
    stmt = select(Project.id).where(Project.workspace_id == workspace_id, Project.name == name)
    if exclude_id is not None:
        stmt = stmt.where(Project.id != exclude_id)
    if session.scalar(stmt) is not None:
        raise APIError(409, f"{field}: a project named {name!r} already exists in this workspace")


def _key_free(session: Session, key: str, field: str, exclude_id: int | None = None) -> None:
    stmt = select(Project.id).where(Project.key == key)
    if exclude_id is not None:
        stmt = stmt.where(Project.id != exclude_id)
    if session.scalar(stmt) is not None:
        raise APIError(409, f"{field}: project key {key!r} is already in use")


def _new_key(session: Session, name: str) -> str:
    """Upstream's scheme: up to three letters/digits of the name, then random ones (unique)."""
    prefix = re.sub(r"[^A-Za-z0-9]", "", name).upper()[:KEY_PREFIX_LENGTH]
    alphabet = string.ascii_uppercase + string.digits
    for _ in range(64):
        key = prefix + "".join(random.choices(alphabet, k=MAX_KEY_LENGTH - len(prefix)))
        if session.scalar(select(Project.id).where(Project.key == key)) is None:
            return key
    raise APIError(409, "key: could not generate a unique project key; pass one")


def project_json(session: Session, row: Project) -> dict[str, Any]:
    """A project in upstream's ``v1Project`` shape (counts and last start computed)."""
    owner = session.get(User, row.user_id) if row.user_id is not None else None
    workspace = session.get(Workspace, row.workspace_id)
    live = Experiment.state != "DELETED"
    n_exp, n_active, last_start = session.execute(
        select(
            func.count(Experiment.id),
            func.count(Experiment.id).filter(Experiment.state.in_(_ACTIVE_STATES)),
            func.max(Experiment.start_time),
        ).where(Experiment.project_id == row.id, live)
    ).one()
    n_runs = session.scalar(
        select(func.count(Run.id))
        .join(Experiment, Run.experiment_id == Experiment.id)
        .where(Experiment.project_id == row.id, live)
    )
    return {
        "id": row.id,
        "name": row.name,
        "key": row.key or "",
        "workspaceId": row.workspace_id,
        "workspaceName": workspace.name if workspace is not None else "",
        "description": row.description or "",
        "lastExperimentStartedAt": ts(last_start),
        "notes": [dict(n) for n in (row.notes or [])],
        "numExperiments": int(n_exp or 0),
        "numActiveExperiments": int(n_active or 0),
        "numRuns": int(n_runs or 0),
        # as upstream: a project of an archived workspace shows as archived
        "archived": bool(row.archived) or bool(workspace is not None and workspace.archived),
        "username": owner.username if owner is not None else "",
        "userId": row.user_id if row.user_id is not None else 0,
        "immutable": bool(row.immutable),
        "state": getattr(row, "state", None) or "WORKSPACE_STATE_UNSPECIFIED",
        "errorMessage": getattr(row, "error_message", None) or "",
    }


_NO_PROJECT = {
    "projectName": "",
    "workspaceId": 0,
    "workspaceName": "",
    "parentArchived": False,
    "projectOwnerId": 0,
}


def _names_query() -> Any:
    p, w = Project.__table__.c, Workspace.__table__.c
    return (
        select(p.id, p.name, p.workspace_id, p.archived, p.user_id, w.name, w.archived)
        .outerjoin(Workspace.__table__, w.id == p.workspace_id)
        .where(p.id.in_(bindparam("ids", expanding=True)))
    )


_NAMES = _names_query()


def project_names(session: Session, project_id: int) -> dict[str, Any]:
    """The experiment-side fields of a project: ``projectName``, ``workspaceId``, ...
    (for experiments' wire shape)."""
    return projects_names(session, [project_id])[project_id]


def projects_names(session: Session, project_ids: Sequence[int]) -> dict[int, dict[str, Any]]:
    """:func:`project_names` of many projects in one statement (a missing project: empty names)."""
    out = {pid: dict(_NO_PROJECT) for pid in project_ids}
    rows = core_rows(session, _NAMES, {"ids": list(set(project_ids))})
    for pid, name, ws_id, archived, owner, ws_name, ws_archived in rows:
        out[pid] = {
            "projectName": name,
            "workspaceId": ws_id,
            "workspaceName": ws_name or "",
            "parentArchived": bool(archived or ws_archived),
            "projectOwnerId": owner if owner is not None else 1,
        }
    return out


def resolve_by_names(session: Session, workspace_name: str, project_name: str) -> int:
    """The id of project ``project_name`` in workspace ``workspace_name`` (an experiment config's
    ``workspace``/``project``); 404 naming the missing one."""
    workspace = session.scalar(select(Workspace).where(Workspace.name == workspace_name))
    if workspace is None:
        raise APIError(404, f"workspace: workspace {workspace_name!r} not found")
    project_id = session.scalar(
        select(Project.id).where(Project.workspace_id == workspace.id, Project.name == project_name)
    )
    if project_id is None:
        raise APIError(
            404, f"project: project {project_name!r} not found in workspace {workspace_name!r}"
        )
    return int(project_id)


def check_can_add_experiments(session: Session, project_id: int, field: str = "projectId") -> None:
    """404 for a missing project, 400 for an archived one (or one in an archived workspace)."""
    project = session.get(Project, project_id)
    if project is None:
        raise APIError(404, f"{field}: project {project_id} not found")
    if project.archived:
        raise APIError(
            400, f"{field}: project {project_id} is archived and cannot add new experiments"
        )
    workspace = session.get(Workspace, project.workspace_id)
    if workspace is not None and workspace.archived:
        raise APIError(
            400,
            f"{field}: project {project_id} is in an archived workspace and cannot add new "
            "experiments",
        )


def _check_deletable(
    session: Session, project_id: int, rows: Sequence[Any], requester: User
) -> None:
    """Refuse deleting a project before anything goes: an unfinished experiment, another user's
    experiment (unless an admin deletes), a checkpoint that is a model version."""
    if not requester.admin:
        others = session.scalars(
            select(Experiment.id).where(
                Experiment.id.in_([i for i, _ in rows]),
                Experiment.owner_id != requester.id,
            )
        ).all()
        if others:
            raise APIError(
                403,
                f"project {project_id} holds other users' experiments ({sorted(others)}); "
                "only their owners or an admin may delete them",
            )
    running = sorted(i for i, s in rows if s not in TERMINAL_STATES)
    if running:
        raise APIError(
            400,
            f"project {project_id} has experiments that are not finished ({running}); "
            "kill them or move them first",
        )
    uuids = session.scalars(
        select(Checkpoint.uuid).where(Checkpoint.experiment_id.in_([i for i, _ in rows]))
    )
    in_registry = registered_versions(session, list(uuids))
    if in_registry:
        versions = sorted({v for found in in_registry.values() for v in found})
        raise APIError(
            400,
            f"project {project_id} has checkpoints registered in the model registry "
            f"({', '.join(versions)}); delete those model versions first",
        )


class Projects:
    """Project operations of the REST API.

    Args:
        db: the master's database.
        delete_experiment: deletes one finished experiment with its checkpoints (the experiments
            service's ``delete``), used when a project is deleted.
    """

    def __init__(self, db: Database, delete_experiment: Callable[[int, User], None]) -> None:
        self._db = db
        self._delete_experiment = delete_experiment

    def get(self, project_id: int) -> dict[str, Any]:
        """One project (``v1Project``); 404 when there is none."""
        with self._db.read() as session:
            return project_json(session, find_project(session, project_id))

    def workspace_of(self, project_id: int) -> int:
        """The workspace a project is in (for authorization); 404 when there is no project."""
        with self._db.read() as session:
            return find_project(session, project_id).workspace_id

    def list_in_workspace(
        self,
        workspace_id: int | None,
        *,
        name: str | None = None,
        archived: bool | None = None,
        users: Sequence[str] = (),
        user_ids: Sequence[int] = (),
        sort_by: str = "SORT_BY_ID",
        order_by: str = "ORDER_BY_ASC",
        offset: int = 0,
        limit: int = 0,
        workspace_ids: Sequence[int] | None = None,
    ) -> tuple[list[dict[str, Any]], int]:
        """Projects of a workspace (all workspaces for None, or those of ``workspace_ids``), with
        upstream's filters and sort; returns one page and the total count."""
        stmt = select(Project)
        if workspace_id is not None:
            stmt = stmt.where(Project.workspace_id == workspace_id)
        if workspace_ids is not None:
            stmt = stmt.where(Project.workspace_id.in_(list(workspace_ids)))
        if name:
            stmt = stmt.where(Project.name == name)
        if archived is not None:
            stmt = stmt.where(Project.archived.is_(archived))
        columns = {
            "SORT_BY_ID": Project.id,
            "SORT_BY_DESCRIPTION": Project.description,
            "SORT_BY_CREATION_TIME": Project.created_at,
        }
        column = columns.get(sort_by, Project.id)
        desc = order_by == "ORDER_BY_DESC"
        stmt = stmt.order_by(column.desc() if desc else column.asc(), Project.id)
        with self._db.read() as session:
            if users or user_ids:
                ids = set(user_ids)
                if users:
                    ids |= set(session.scalars(select(User.id).where(User.username.in_(users))))
                stmt = stmt.where(Project.user_id.in_(ids))
            rows = list(session.scalars(stmt))
            if sort_by == "SORT_BY_NAME":  # then by id, in the same direction (as upstream)
                rows.sort(key=lambda p: (name_order_key(p.name), p.id), reverse=desc)
            total = len(rows)
            page = rows[offset : offset + limit] if limit else rows[offset:]
            return [project_json(session, r) for r in page], total

    def create(
        self,
        workspace_id: int,
        name: str,
        user: User,
        *,
        description: str = "",
        key: str | None = None,
    ) -> dict[str, Any]:
        """Add a project to a workspace (not an archived one, not the default one, as upstream):
        its ``v1Project``."""
        check_name(name)
        if key is not None:
            key = check_key(key)
        try:
            with self._db.write() as session:
                workspace = find_workspace(session, workspace_id)
                if workspace.immutable:
                    raise APIError(
                        400,
                        f"workspaceId: workspace {workspace_id} is the default workspace; it "
                        "takes no new projects",
                    )
                if workspace.archived:
                    raise APIError(
                        400,
                        f"workspaceId: workspace {workspace_id} is archived; unarchive it first",
                    )
                _name_free(session, workspace_id, name, "name")
                if key is None:
                    key = _new_key(session, name)
                else:
                    _key_free(session, key, "key")
                row = Project(
                    name=name,
                    workspace_id=workspace_id,
                    description=description,
                    key=key,
                    user_id=user.id,
                    notes=[],
                    archived=False,
                    immutable=False,
                    created_at=utcnow(),
                )
                session.add(row)
                session.flush()
                project_id = row.id
        except IntegrityError:
            raise APIError(409, f"name: project {name!r} or key {key!r} already exists") from None
        return self.get(project_id)

    def patch(self, project_id: int, fields: ProjectFields) -> dict[str, Any]:
        """Change a project's name, description or key: its new ``v1Project``."""
        if fields.name is not None:
            check_name(fields.name, "project.name")
        key = check_key(fields.key, "project.key") if fields.key is not None else None
        try:
            with self._db.write() as session:
                project = find_project(session, project_id)
                if project.immutable and (fields.name is not None or key is not None):
                    raise APIError(
                        400, f"project {project_id} is the default project and cannot be renamed"
                    )
                _workspace_unarchived(session, project)
                if project.archived:
                    raise APIError(400, f"project {project_id} is archived; unarchive it first")
                if fields.name is not None and fields.name != project.name:
                    _name_free(
                        session, project.workspace_id, fields.name, "project.name", project.id
                    )
                    project.name = fields.name
                if fields.description is not None:
                    project.description = fields.description
                if key is not None and key != project.key:
                    _key_free(session, key, "project.key", project.id)
                    project.key = key
        except IntegrityError:
            raise APIError(409, "project.name: the name or key is already in use") from None
        return self.get(project_id)

    def set_archived(self, project_id: int, archived: bool) -> None:
        """Archive or unarchive a project (not the default one, not in an archived workspace)."""
        with self._db.write() as session:
            project = find_project(session, project_id)
            if project.immutable:
                verb = "archived" if archived else "unarchived"
                raise APIError(
                    400, f"project {project_id} is the default project and cannot be {verb}"
                )
            _workspace_unarchived(session, project)
            project.archived = archived

    def move(self, project_id: int, workspace_id: int) -> None:
        """Move a project (not the default one, not archived) to another, unarchived workspace
        that is not the default one (as upstream)."""
        with self._db.write() as session:
            project = find_project(session, project_id)
            if project.immutable:
                raise APIError(
                    400, f"project {project_id} is the default project and cannot be moved"
                )
            if project.archived:
                raise APIError(400, f"project {project_id} is archived and cannot be moved")
            _workspace_unarchived(session, project)
            target = find_workspace(session, workspace_id, "destinationWorkspaceId")
            if target.immutable:
                raise APIError(
                    400,
                    f"destinationWorkspaceId: workspace {workspace_id} is the default workspace; "
                    "it takes no projects",
                )
            if target.archived:
                raise APIError(400, f"destinationWorkspaceId: workspace {workspace_id} is archived")
            _name_free(session, workspace_id, project.name, "destinationWorkspaceId", project.id)
            project.workspace_id = workspace_id

    def delete(self, project_id: int, requester: User) -> None:
        """Delete a project (not the default one) with its experiments, which must all be
        finished; each experiment goes as ``DELETE /experiments/{id}`` would delete it."""
        with self._db.read() as session:
            project = find_project(session, project_id)
            if project.immutable:
                raise APIError(
                    400, f"project {project_id} is the default project and cannot be deleted"
                )
            if project.user_id != requester.id and not requester.admin:
                raise APIError(403, "only the project's owner or an admin may delete it")
            rows = session.execute(
                select(Experiment.id, Experiment.state).where(
                    Experiment.project_id == project_id, Experiment.state != "DELETED"
                )
            ).all()
            _check_deletable(session, project_id, rows, requester)
        for exp_id, _state in rows:
            self._delete_experiment(int(exp_id), requester)
        with self._db.write() as session:
            left = session.scalar(
                select(func.count(Experiment.id)).where(Experiment.project_id == project_id)
            )
            if left:
                raise APIError(409, f"project {project_id} got new experiments; delete again")
            row = session.get(Project, project_id)
            if row is not None:
                session.delete(row)

    def add_note(self, project_id: int, name: str, contents: str) -> list[dict[str, str]]:
        """Append a note to a project: the project's notes after the change."""
        with self._db.write() as session:
            project = find_project(session, project_id)
            notes = [dict(n) for n in (project.notes or [])]
            notes.append({"name": name, "contents": contents})
            project.notes = notes
            return notes

    def put_notes(self, project_id: int, notes: list[dict[str, str]]) -> list[dict[str, str]]:
        """Replace a project's notes: the notes as stored."""
        with self._db.write() as session:
            project = find_project(session, project_id)
            project.notes = [dict(n) for n in notes]
            return [dict(n) for n in project.notes]

    def move_experiments(
        self,
        experiment_ids: Sequence[int],
        destination_project_id: int,
        source_project_id: int | None = None,
    ) -> list[dict[str, Any]]:
        """Move experiments (of ``source_project_id`` when given) to a project, as upstream: an
        archived experiment, one in an archived project, or one going into an archived project
        stays; one result per experiment (``{"id", "error"}``, ``error`` empty on success)."""
        results: list[dict[str, Any]] = []
        with self._db.write() as session:
            check_can_add_experiments(session, destination_project_id, "destinationProjectId")
            for exp_id in experiment_ids:
                exp = session.get(Experiment, exp_id)
                error = ""
                if exp is None or exp.state == "DELETED":
                    error = f"experiment {exp_id} not found"
                elif source_project_id is not None and exp.project_id != source_project_id:
                    error = f"experiment {exp_id} is not in project {source_project_id}"
                elif exp.archived:
                    error = f"experiment {exp_id} is archived and cannot be moved"
                else:
                    source = session.get(Project, exp.project_id)
                    if source is not None and source.archived:
                        error = (
                            f"project {source.id} is archived and cannot have experiments "
                            "moved from it"
                        )
                if not error:
                    session.execute(
                        update(Experiment)
                        .where(Experiment.id == exp_id)
                        .values(project_id=destination_project_id)
                    )
                results.append({"id": exp_id, "error": error})
        return results

    def experiment_target(self, requested: int | None, config: dict[str, Any]) -> int:
        """The project a new experiment goes to, as upstream: ``projectId`` when above 1, else the
        config's ``workspace``/``project`` names (both or neither), else the default project;
        404 naming what is missing."""
        if requested is not None and requested > DEFAULT_PROJECT_ID:
            return requested
        workspace_name = str(config.get("workspace") or "")
        project_name = str(config.get("project") or "")
        if bool(workspace_name) != bool(project_name):
            raise APIError(
                400, "workspace and project must both be included in config if one is provided"
            )
        if not workspace_name:
            return DEFAULT_PROJECT_ID
        with self._db.read() as session:
            return resolve_by_names(session, workspace_name, project_name)

    def check_can_add(self, project_id: int) -> None:
        """404 for a missing project, 400 for an archived one (or one in an archived workspace)."""
        with self._db.read() as session:
            check_can_add_experiments(session, project_id)
