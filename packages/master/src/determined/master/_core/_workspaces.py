"""The workspaces service: named collections of projects, with defaults for what runs inside them.

Values arrive parsed and type-checked by the API edge; this service enforces what needs the
database, as upstream does: names unique on the master regardless of case (1-80 characters, not
blank), the default workspace (``Uncategorized``, immutable) never renamed, edited, archived or
deleted, a workspace with models not deleted (move or delete the models first), and per-user pins
(a new workspace is pinned for its creator).
A workspace's ``checkpoint_storage_config`` is what experiments in it get when their own config has
no ``checkpoint_storage`` (it is merged under theirs, above the master's default); its agent
user/group and default pools are stored and returned as upstream's ``v1Workspace`` holds them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from determined.master._wire import APIError, ts
from determined.master.db import (
    Database,
    Experiment,
    Model,
    NtscTask,
    Project,
    Template,
    User,
    Workspace,
    WorkspacePin,
    utcnow,
)

MAX_NAME_LENGTH = 80
SECRET_KEYS = ("access_key", "secret_key", "connection_string", "credential")
"""Checkpoint-storage fields upstream masks when it shows a workspace (``Printable()``)."""
MASK = "********"
UNSET: Any = object()
"""A field the request did not name (leave it as it is)."""


@dataclasses.dataclass(frozen=True)
class WorkspaceFields:
    """The settable fields of a workspace (create and ``PATCH``); ``UNSET`` leaves one as is.

    ``agent_user_group`` and ``checkpoint_storage_config`` may be ``None`` (or ``{}``) to clear them.
    """

    name: Any = UNSET
    agent_user_group: Any = UNSET
    checkpoint_storage_config: Any = UNSET
    default_compute_pool: Any = UNSET
    default_aux_pool: Any = UNSET


def name_order_key(name: str) -> tuple[str, str, str]:
    """The order of names when sorting by name, as upstream's PostgreSQL (a glibc ``en_US``
    collation) gives it: letters and digits first, regardless of case (``_TestWS`` sorts
    with the t's, ``_TestPatched`` before ``_TestPRJ``); punctuation and case only break ties."""
    folded = name.casefold()
    return "".join(c for c in folded if c.isalnum()), folded, name


def check_name(name: Any, field: str = "name") -> str:
    """A valid workspace name (upstream's rules), or a 400 naming ``field``."""
    if not isinstance(name, str):
        raise APIError(400, f"{field}: must be a string")
    if not name:
        raise APIError(400, f"{field}: a workspace name must be at least 1 character long")
    if len(name) > MAX_NAME_LENGTH:
        raise APIError(
            400, f"{field}: a workspace name must be at most {MAX_NAME_LENGTH} characters long"
        )
    if not name.strip():
        raise APIError(400, f"{field}: a workspace name must contain a non-whitespace character")
    return name


def find_workspace(session: Session, workspace_id: int) -> Workspace:
    """The workspace with this id; 404 otherwise."""
    workspace = session.get(Workspace, workspace_id)
    if workspace is None:
        raise APIError(404, f"workspace {workspace_id} not found")
    return workspace


def masked_storage(config: dict[str, Any] | None) -> dict[str, Any] | None:
    """A checkpoint-storage config with its secrets replaced by ``********`` (for display)."""
    if not config:
        return None
    return {k: (MASK if k in SECRET_KEYS and v else v) for k, v in config.items()}


def workspace_json(session: Session, row: Workspace, viewer_id: int | None) -> dict[str, Any]:
    """A workspace in upstream's ``v1Workspace`` shape, ``pinned`` for the viewing user."""
    owner = session.get(User, row.user_id) if row.user_id is not None else None
    projects = select(Project.id).where(Project.workspace_id == row.id).scalar_subquery()
    n_projects = session.scalar(
        select(func.count(Project.id)).where(Project.workspace_id == row.id)
    )
    n_experiments = session.scalar(
        select(func.count(Experiment.id)).where(
            Experiment.project_id.in_(projects), Experiment.state != "DELETED"
        )
    )
    pin = session.get(WorkspacePin, (row.id, viewer_id)) if viewer_id is not None else None
    return {
        "id": row.id,
        "name": row.name,
        "archived": bool(row.archived),
        "username": owner.username if owner is not None else "",
        "immutable": bool(row.immutable),
        "numProjects": int(n_projects or 0),
        "pinned": pin is not None,
        "userId": row.user_id if row.user_id is not None else 0,
        "numExperiments": int(n_experiments or 0),
        "state": row.state or "WORKSPACE_STATE_UNSPECIFIED",
        "errorMessage": row.error_message or "",
        "agentUserGroup": dict(row.agent_user_group) if row.agent_user_group else None,
        "checkpointStorageConfig": masked_storage(row.checkpoint_storage_config),
        "pinnedAt": ts(pin.pinned_at) if pin is not None else None,
        "defaultComputePool": row.default_compute_pool or "",
        "defaultAuxPool": row.default_aux_pool or "",
    }


def _name_free(session: Session, name: str, field: str, exclude_id: int | None = None) -> None:
    stmt = select(Workspace.id).where(func.lower(Workspace.name) == name.lower())
    if exclude_id is not None:
        stmt = stmt.where(Workspace.id != exclude_id)
    if session.scalar(stmt) is not None:
        raise APIError(
            409, f"{field}: a workspace named {name!r} already exists (names are case-insensitive)"
        )


def _mutable(workspace: Workspace, action: str) -> None:
    if workspace.immutable:
        raise APIError(
            400, f"workspace {workspace.id} ({workspace.name}) is the default workspace: "
            f"it cannot be {action}"
        )  # fmt: skip


class Workspaces:
    """Workspace operations of the REST API.

    Args:
        db: the master's database.
        delete_project: deletes one project with its (finished) experiments, as
            ``DELETE /api/v1/projects/{id}`` does (the projects service's ``delete``).
        assign_creator: called in the creating transaction with (session, workspace id, user):
            the authorization's rule for what a creator holds on its new workspace.
    """

    def __init__(
        self,
        db: Database,
        delete_project: Callable[[int, User], None],
        assign_creator: Callable[[Session, int, User], None] | None = None,
    ) -> None:
        self._db = db
        self._delete_project = delete_project
        self._assign_creator = assign_creator

    def get(self, workspace_id: int, viewer_id: int | None = None) -> dict[str, Any]:
        """One workspace (``v1Workspace``); 404 when there is none."""
        with self._db.read() as session:
            return workspace_json(session, find_workspace(session, workspace_id), viewer_id)

    def list(
        self,
        viewer_id: int | None,
        *,
        name: str | None = None,
        name_case_sensitive: str | None = None,
        archived: bool | None = None,
        pinned: bool | None = None,
        users: Sequence[str] = (),
        user_ids: Sequence[int] = (),
        sort_by: str = "SORT_BY_ID",
        order_by: str = "ORDER_BY_ASC",
        offset: int = 0,
        limit: int = 0,
        workspace_ids: set[int] | None = None,
    ) -> tuple[list[dict[str, Any]], int, int]:
        """Workspaces with upstream's filters (``name`` a case-insensitive LIKE pattern,
        ``name_case_sensitive`` exact) and sort, only those of ``workspace_ids`` when given; returns one page, the
        offset it starts at and the total."""
        stmt = select(Workspace)
        if workspace_ids is not None:
            stmt = stmt.where(Workspace.id.in_(sorted(workspace_ids)))
        if name:  # upstream's ILIKE: any case, with % and _ as wildcards
            stmt = stmt.where(func.lower(Workspace.name).like(name.lower()))
        if name_case_sensitive:
            stmt = stmt.where(Workspace.name == name_case_sensitive)
        if archived is not None:
            stmt = stmt.where(Workspace.archived.is_(archived))
        pinned_ids = select(WorkspacePin.workspace_id).where(WorkspacePin.user_id == viewer_id)
        if pinned is not None:
            clause = Workspace.id.in_(pinned_ids)
            stmt = stmt.where(clause if pinned else ~clause)
        desc = order_by == "ORDER_BY_DESC"
        stmt = stmt.order_by(Workspace.id.desc() if desc else Workspace.id.asc())
        with self._db.read() as session:
            if users or user_ids:
                ids = set(user_ids)
                if users:
                    ids |= set(session.scalars(select(User.id).where(User.username.in_(users))))
                stmt = stmt.where(Workspace.user_id.in_(sorted(ids)))
            rows = list(session.scalars(stmt))
            if sort_by == "SORT_BY_NAME":  # then by id, in the same direction (as upstream)
                rows.sort(key=lambda w: (name_order_key(w.name), w.id), reverse=desc)
            total = len(rows)
            start = max(total + offset, 0) if offset < 0 else min(offset, total)
            page = rows[start : start + limit] if limit > 0 else rows[start:]
            return [workspace_json(session, w, viewer_id) for w in page], start, total

    def create(self, fields: WorkspaceFields, user: User) -> dict[str, Any]:
        """A new workspace owned by ``user`` and pinned for them, as upstream (409 when the name
        is taken): its ``v1Workspace``."""
        name = check_name(fields.name)
        try:
            with self._db.write() as session:
                _name_free(session, name, "name")
                row = Workspace(
                    name=name,
                    user_id=user.id,
                    archived=False,
                    immutable=False,
                    created_at=utcnow(),
                    agent_user_group=_or_none(fields.agent_user_group),
                    checkpoint_storage_config=_or_none(fields.checkpoint_storage_config),
                    default_compute_pool=_or_empty(fields.default_compute_pool),
                    default_aux_pool=_or_empty(fields.default_aux_pool),
                )
                session.add(row)
                session.flush()
                # as upstream, a new workspace is pinned for its creator
                session.add(WorkspacePin(workspace_id=row.id, user_id=user.id))
                if self._assign_creator is not None:
                    self._assign_creator(session, row.id, user)
                workspace_id = row.id
        except IntegrityError:
            raise APIError(409, f"name: a workspace named {name!r} already exists") from None
        return self.get(workspace_id, user.id)

    def patch(self, workspace_id: int, fields: WorkspaceFields, viewer_id: int) -> dict[str, Any]:
        """Apply the named fields to a workspace (not the default one): its new ``v1Workspace``."""
        try:
            with self._db.write() as session:
                row = find_workspace(session, workspace_id)
                _mutable(row, "edited")
                if row.archived:  # as upstream: unarchive it first
                    raise APIError(400, f"workspace {row.id} is archived: unarchive it to edit it")
                if fields.name is not UNSET and fields.name != row.name:
                    row.name = check_name(fields.name, "workspace.name")
                    _name_free(session, row.name, "workspace.name", exclude_id=row.id)
                if fields.agent_user_group is not UNSET:
                    row.agent_user_group = _or_none(fields.agent_user_group)
                if fields.checkpoint_storage_config is not UNSET:
                    row.checkpoint_storage_config = _or_none(fields.checkpoint_storage_config)
                if fields.default_compute_pool is not UNSET:
                    row.default_compute_pool = _or_empty(fields.default_compute_pool)
                if fields.default_aux_pool is not UNSET:
                    row.default_aux_pool = _or_empty(fields.default_aux_pool)
        except IntegrityError:
            raise APIError(
                409, f"workspace.name: a workspace named {fields.name!r} exists"
            ) from None
        return self.get(workspace_id, viewer_id)

    def set_archived(self, workspace_id: int, archived: bool) -> None:
        """Archive or unarchive a workspace (not the default one)."""
        with self._db.write() as session:
            row = find_workspace(session, workspace_id)
            _mutable(row, "archived" if archived else "unarchived")
            row.archived = archived

    def pin(self, workspace_id: int, user_id: int, pinned: bool) -> None:
        """Pin (or unpin) a workspace for one user; pinning twice is a no-op."""
        with self._db.write() as session:
            find_workspace(session, workspace_id)
            pin = session.get(WorkspacePin, (workspace_id, user_id))
            if pinned and pin is None:
                session.add(WorkspacePin(workspace_id=workspace_id, user_id=user_id))
            elif not pinned and pin is not None:
                session.delete(pin)

    def delete(
        self,
        workspace_id: int,
        requester: User,
        stop_task: Callable[[str, str], None] | None = None,
    ) -> bool:
        """Delete a workspace with its projects (each with its finished experiments), templates
        and finished tasks; refused for the default workspace, one with models or with unfinished
        experiments. Returns True once it is gone (upstream's ``completed``).

        Commands, notebooks, TensorBoards and shells still running in it are stopped first with
        ``stop_task(task_id, reason)`` (the tasks service's ``stop``), as upstream does: they
        end on their own and keep their records (``GET`` by id answers; lists no longer show
        them). Without ``stop_task`` such a workspace is not deleted (400).
        """
        with self._db.write() as session:
            row = find_workspace(session, workspace_id)
            _mutable(row, "deleted")
            models = session.scalar(
                select(func.count(Model.id)).where(Model.workspace_id == workspace_id)
            )
            if models:
                raise APIError(
                    400,
                    f"workspace {workspace_id} contains models; move or delete the models first",
                )
            running = list(
                session.scalars(
                    select(NtscTask.task_id).where(
                        NtscTask.workspace_id == workspace_id, NtscTask.end_time.is_(None)
                    )
                )
            )
            if running and stop_task is None:
                raise APIError(
                    400,
                    f"workspace {workspace_id} has running tasks ({', '.join(sorted(running))});"
                    " kill them first",
                )
            row.state = "WORKSPACE_STATE_DELETING"
            row.error_message = ""
            project_ids = list(
                session.scalars(
                    select(Project.id)
                    .where(Project.workspace_id == workspace_id)
                    .order_by(Project.id)
                )
            )
        for task_id in running:  # as upstream, before the projects go
            assert stop_task is not None
            stop_task(task_id, f"killed: workspace {workspace_id} was deleted")
        try:
            for project_id in project_ids:
                self._delete_project(project_id, requester)
        except APIError as e:
            with self._db.write() as session:
                failed = session.get(Workspace, workspace_id)
                if failed is not None:
                    failed.state = "WORKSPACE_STATE_DELETE_FAILED"
                    failed.error_message = e.message
            raise
        with self._db.write() as session:
            session.execute(delete(Template).where(Template.workspace_id == workspace_id))
            session.execute(
                delete(NtscTask).where(
                    NtscTask.workspace_id == workspace_id,
                    NtscTask.end_time.is_not(None),
                    NtscTask.task_id.not_in(running),  # the stopped ones keep their records
                )
            )
            gone = session.get(Workspace, workspace_id)
            if gone is not None:
                session.delete(gone)
        return True

    def default_pool_of_project(self, project_id: int, slots: int) -> str:
        """The default pool of the workspace a project is in, for a task of ``slots`` slots: its
        compute pool when ``slots > 0``, else its aux pool (``""``: none set), as upstream."""
        column = Workspace.default_compute_pool if slots > 0 else Workspace.default_aux_pool
        with self._db.read() as session:
            pool = session.scalar(
                select(column)
                .join(Project, Project.workspace_id == Workspace.id)
                .where(Project.id == project_id)
            )
            return str(pool or "")

    def checkpoint_storage_of_project(self, project_id: int) -> dict[str, Any] | None:
        """The ``checkpoint_storage_config`` of the workspace a project is in (None if unset)."""
        with self._db.read() as session:
            config = session.scalar(
                select(Workspace.checkpoint_storage_config)
                .join(Project, Project.workspace_id == Workspace.id)
                .where(Project.id == project_id)
            )
            return dict(config) if config else None


def _or_none(value: Any) -> Any:
    return None if value is UNSET or not value else value


def _or_empty(value: Any) -> str:
    return "" if value is UNSET or value is None else str(value)
