"""The one authorization API of the master: upstream's built-in roles, their permissions, and checks.

Every route asks :class:`Authz` whether the calling user may do something in a workspace:
``authz.check(principal, Permission.UPDATE_EXPERIMENT, workspace_id)`` raises a 403 ``APIError``
naming the permission; ``authz.can(...)`` answers a bool; ``authz.visible_workspace_ids(principal)``
is the set of workspaces a listing may show (``None``: all of them).

A user's grants are the union of the roles assigned to them and to their groups, cluster-wide
(``workspace_id`` NULL) or on one workspace; admins (``users.admin``) hold ClusterAdmin; every
non-admin user implicitly holds ``default_role`` (Editor) on the default workspace (id 1), so a new
user is a member of the default workspace only. Resolved grants are cached per user and dropped
whenever a flush writes a user, group, membership, role assignment, project or workspace, so a check
costs a dict lookup.

With RBAC off (``security: {authz: {type: basic}}``) upstream's basic rules hold: everybody may view,
create and edit everything, except that only admins and the owners rename, archive, unarchive or
delete a workspace or project (:meth:`Authz.check_owner`); the other cluster-level permissions
(users, groups, roles…) stay admin-only.
"""

from __future__ import annotations

import dataclasses
import enum
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from sqlalchemy import event, select

from determined.master._wire import APIError

if TYPE_CHECKING:
    from determined.master.db import Database

DEFAULT_WORKSPACE_ID = 1
"""The ``Uncategorized`` workspace every user is a member of."""


class Permission(enum.IntEnum):
    """Upstream 0.38.1's ``determined.rbac.v1.PermissionType``: the names are the wire's
    (``PERMISSION_TYPE_<NAME>``); the numbers follow upstream's scheme (9xxxx: cluster-only)."""

    ADMINISTRATE_USER = 91001
    ADMINISTRATE_OAUTH = 91002
    CREATE_EXPERIMENT = 2001
    VIEW_EXPERIMENT_ARTIFACTS = 2002
    VIEW_EXPERIMENT_METADATA = 2003
    UPDATE_EXPERIMENT = 2004
    UPDATE_EXPERIMENT_METADATA = 2005
    DELETE_EXPERIMENT = 2006
    CREATE_NSC = 3001
    VIEW_NSC = 3002
    UPDATE_NSC = 3003
    UPDATE_GROUP = 93001
    CREATE_WORKSPACE = 94001
    VIEW_WORKSPACE = 4002
    UPDATE_WORKSPACE = 4003
    DELETE_WORKSPACE = 4004
    SET_WORKSPACE_AGENT_USER_GROUP = 4005
    SET_WORKSPACE_CHECKPOINT_STORAGE_CONFIG = 4006
    SET_WORKSPACE_DEFAULT_RESOURCE_POOL = 4007
    CREATE_PROJECT = 5001
    VIEW_PROJECT = 5002
    UPDATE_PROJECT = 5003
    DELETE_PROJECT = 5004
    ASSIGN_ROLES = 6002
    VIEW_MODEL_REGISTRY = 7001
    EDIT_MODEL_REGISTRY = 7002
    CREATE_MODEL_REGISTRY = 7003
    DELETE_MODEL_REGISTRY = 7004
    DELETE_MODEL_VERSION = 7005
    DELETE_OTHER_USER_MODEL_REGISTRY = 7006
    DELETE_OTHER_USER_MODEL_VERSION = 7007
    VIEW_MASTER_LOGS = 8001
    VIEW_CLUSTER_USAGE = 8002
    UPDATE_AGENTS = 8003
    VIEW_SENSITIVE_AGENT_INFO = 8004
    VIEW_MASTER_CONFIG = 8005
    UPDATE_MASTER_CONFIG = 8006
    VIEW_EXTERNAL_JOBS = 8007
    CONTROL_STRICT_JOB_QUEUE = 8008
    VIEW_TEMPLATES = 9001
    UPDATE_TEMPLATES = 9002
    CREATE_TEMPLATES = 9003
    DELETE_TEMPLATES = 9004
    MODIFY_RP_WORKSPACE_BINDINGS = 10001
    SET_WORKSPACE_NAMESPACE_BINDINGS = 11001
    SET_RESOURCE_QUOTAS = 11002
    VIEW_RESOURCE_QUOTAS = 11003
    ADMINISTRATE_TOKEN = 12001
    UPDATE_TOKEN = 12002
    CREATE_TOKEN = 12003
    CREATE_OTHER_TOKEN = 12004
    VIEW_OTHER_TOKEN = 12005
    VIEW_TOKEN = 12006
    UPDATE_ROLES = 96001
    EDIT_WEBHOOKS = 97001
    VIEW_WEBHOOKS = 97002
    MODIFY_GLOBAL_CONFIG_POLICIES = 98001
    MODIFY_WORKSPACE_CONFIG_POLICIES = 13001
    VIEW_GLOBAL_CONFIG_POLICIES = 98002
    VIEW_WORKSPACE_CONFIG_POLICIES = 13002

    @property
    def wire_name(self) -> str:
        """Upstream's enum name, ``PERMISSION_TYPE_...``."""
        return f"PERMISSION_TYPE_{self.name}"

    @property
    def label(self) -> str:
        """Upstream's human name, e.g. ``update experiment``."""
        return self.name.lower().replace("_", " ").replace("nsc", "notebooks/shells/commands")

    @property
    def cluster_only(self) -> bool:
        """Whether it can only be granted cluster-wide (upstream's ``global_only``)."""
        return self.value >= 8000 and not 9000 <= self.value < 10000 and self not in _WORKSPACE_WIDE


def _basic_allows(principal: Any, permission: Permission) -> bool:
    """Upstream's basic authorization: everything but the cluster-level permissions, which stay with
    admins — except creating a workspace, which upstream's basic rules allow everybody."""
    if permission is Permission.CREATE_WORKSPACE:
        return True
    return not permission.cluster_only or bool(_user_of(principal).admin)


_WORKSPACE_WIDE = frozenset(
    {
        Permission.VIEW_RESOURCE_QUOTAS,
        Permission.MODIFY_WORKSPACE_CONFIG_POLICIES,
        Permission.VIEW_WORKSPACE_CONFIG_POLICIES,
    }
)
"""The permissions numbered like cluster-level ones that can still be held on one workspace."""


def parse_permission(value: Any) -> Permission:
    """A permission from its id, ``PERMISSION_TYPE_X`` or ``X``; 400 naming ``permission`` else."""
    try:
        if isinstance(value, int) or (isinstance(value, str) and value.isdigit()):
            return Permission(int(value))
        name = str(value).upper().removeprefix("PERMISSION_TYPE_")
        return Permission[name]
    except (KeyError, ValueError):
        raise APIError(400, f"permission: unknown permission {value!r}") from None


P = Permission
_VIEW = frozenset(
    {
        P.VIEW_EXPERIMENT_ARTIFACTS,
        P.VIEW_EXPERIMENT_METADATA,
        P.VIEW_NSC,
        P.VIEW_WORKSPACE,
        P.VIEW_PROJECT,
        P.VIEW_MODEL_REGISTRY,
        P.VIEW_TEMPLATES,
        P.VIEW_TOKEN,
        P.VIEW_RESOURCE_QUOTAS,
        P.VIEW_WORKSPACE_CONFIG_POLICIES,
    }
)
_OWN_TOKENS = frozenset({P.UPDATE_TOKEN, P.CREATE_TOKEN, P.VIEW_TOKEN})
_EXPERIMENTS = frozenset(
    {
        P.CREATE_EXPERIMENT,
        P.UPDATE_EXPERIMENT,
        P.UPDATE_EXPERIMENT_METADATA,
        P.DELETE_EXPERIMENT,
        P.EDIT_MODEL_REGISTRY,
        P.CREATE_MODEL_REGISTRY,
        P.DELETE_MODEL_REGISTRY,
        P.DELETE_MODEL_VERSION,
        P.CREATE_TEMPLATES,
        P.UPDATE_TEMPLATES,
        P.DELETE_TEMPLATES,
    }
)
_NSC = frozenset({P.CREATE_NSC, P.UPDATE_NSC})
_PROJECTS = frozenset({P.CREATE_PROJECT, P.UPDATE_PROJECT, P.DELETE_PROJECT})
_WORKSPACE_ADMIN = frozenset(
    {
        P.UPDATE_WORKSPACE,
        P.DELETE_WORKSPACE,
        P.SET_WORKSPACE_AGENT_USER_GROUP,
        P.SET_WORKSPACE_CHECKPOINT_STORAGE_CONFIG,
        P.SET_WORKSPACE_DEFAULT_RESOURCE_POOL,
        P.ASSIGN_ROLES,
        P.DELETE_OTHER_USER_MODEL_REGISTRY,
        P.DELETE_OTHER_USER_MODEL_VERSION,
        P.MODIFY_WORKSPACE_CONFIG_POLICIES,
    }
)
_EDITOR = _VIEW | _OWN_TOKENS | _EXPERIMENTS | _NSC | _PROJECTS


@dataclasses.dataclass(frozen=True)
class Role:
    """A built-in role: upstream's id and name, its permissions, where it may be assigned."""

    id: int
    name: str
    permissions: frozenset[Permission]
    workspace_assignable: bool = True

    def to_json(self) -> dict[str, Any]:
        """Upstream's ``v1Role``."""
        return {
            "roleId": self.id,
            "name": self.name,
            "permissions": [permission_json(p) for p in sorted(self.permissions)],
            "scopeTypeMask": {"cluster": True, "workspace": self.workspace_assignable},
        }


def permission_json(p: Permission) -> dict[str, Any]:
    """Upstream's ``v1Permission``."""
    return {
        "id": p.wire_name,
        "name": p.label,
        "scopeTypeMask": {"cluster": True, "workspace": not p.cluster_only},
        "isGlobal": p.cluster_only,
    }


ROLES: dict[int, Role] = {
    r.id: r
    for r in (
        Role(1, "ClusterAdmin", frozenset(Permission), workspace_assignable=False),
        Role(2, "WorkspaceAdmin", _EDITOR | _WORKSPACE_ADMIN),
        Role(
            3,
            "WorkspaceCreator",
            frozenset({P.CREATE_WORKSPACE, P.VIEW_TOKEN}),
            workspace_assignable=False,
        ),
        Role(4, "Viewer", _VIEW),
        Role(5, "Editor", _EDITOR),
        Role(6, "ModelRegistryViewer", frozenset({P.VIEW_MODEL_REGISTRY, P.VIEW_TOKEN})),
        Role(7, "EditorRestricted", _EDITOR - _NSC),
        Role(9, "EditorProjectRestricted", _EDITOR - _PROJECTS),
        Role(10, "TokenCreator", _OWN_TOKENS, workspace_assignable=False),
    )
}
"""upstream's built-in roles by id (8 was upstream's GenAIUser, which det does not ship)."""

CLUSTER_ADMIN = ROLES[1]
ROLES_BY_NAME: dict[str, Role] = {r.name.lower(): r for r in ROLES.values()}


def role_by_name(name: str) -> Role:
    """A built-in role by name (any case); 404 naming the role otherwise."""
    role = ROLES_BY_NAME.get(str(name).lower())
    if role is None:
        known = ", ".join(r.name for r in ROLES.values())
        raise APIError(404, f"role {name!r} not found (built-in roles: {known})")
    return role


def role_by_id(role_id: Any, field: str = "roleId") -> Role:
    """A built-in role by id; 400 naming ``field`` for a non-integer, 404 for an unknown id."""
    try:
        rid = int(role_id)
    except (TypeError, ValueError):
        raise APIError(400, f"{field}: must be an integer role id, got {role_id!r}") from None
    role = ROLES.get(rid)
    if role is None:
        raise APIError(404, f"{field}: role {rid} not found")
    return role


@dataclasses.dataclass(frozen=True)
class Grants:
    """What one user may do: permissions held cluster-wide and per workspace id."""

    cluster: frozenset[Permission]
    workspaces: dict[int, frozenset[Permission]]

    def allows(self, permission: Permission, workspace_id: int | None) -> bool:
        if permission in self.cluster:
            return True
        if workspace_id is None:
            return False
        return permission in self.workspaces.get(workspace_id, ())


_ALL = Grants(frozenset(Permission), {})


def _user_of(principal: Any) -> Any:
    return getattr(principal, "user", principal)


class Authz:
    """Role-based access control over the master's database (see the module docstring).

    Attributes:
        enabled: RBAC on (the default) or upstream's basic authorization.
        default_role: the role every non-admin user holds on the default workspace (None: none).
    """

    def __init__(self, db: Database, enabled: bool = True, default_role: str | None = "Editor"):
        self._db = db
        self.enabled = enabled
        self.default_role = role_by_name(default_role) if default_role else None
        self._grants: dict[int, Grants] = {}
        self._project_ws: dict[int, int] = {}
        self._generation = 0
        self._watched_types: tuple[type, ...] | None = None
        self._lock = threading.Lock()
        event.listen(db._sessions, "after_flush", self._after_flush)
        event.listen(db._sessions, "after_commit", self._after_commit)

    def configure(self, enabled: bool, default_role: str | None) -> None:
        """Apply the master's ``security.authz`` settings."""
        self.enabled = enabled
        self.default_role = role_by_name(default_role) if default_role else None
        self.invalidate()

    # --- the checks -------------------------------------------------------------------------

    def grants(self, principal: Any) -> Grants:
        """The resolved grants of the calling user (cached until a relevant write)."""
        user = _user_of(principal)
        if user.admin:
            return _ALL
        cached = self._grants.get(user.id)
        if cached is not None:
            return cached
        generation = self._generation
        grants = self._resolve(user.id)
        with self._lock:
            if generation == self._generation:
                self._grants[user.id] = grants
        return grants

    def can(self, principal: Any, permission: Permission, workspace_id: int | None = None) -> bool:
        """Whether the caller holds ``permission`` on ``workspace_id`` (None: cluster-wide)."""
        if not self.enabled:
            return _basic_allows(principal, permission)
        return self.grants(principal).allows(permission, workspace_id)

    def check(
        self, principal: Any, permission: Permission, workspace_id: int | None = None
    ) -> None:
        """Raise a 403 ``APIError`` naming the permission unless :meth:`can` allows it."""
        if not self.can(principal, permission, workspace_id):
            where = "cluster-wide" if workspace_id is None else f"on workspace {workspace_id}"
            raise APIError(
                403,
                f"permission denied: user {_user_of(principal).username!r} lacks "
                f"{permission.wire_name} ({permission.label}) {where}",
            )

    def check_owner(self, principal: Any, owner_ids: Iterable[int | None], action: str) -> None:
        """Upstream's basic rule (RBAC off) for changing a workspace or project: only admins and
        its owners (``owner_ids``) may ``action`` it; a 403 for anyone else. With RBAC on, the
        roles decide (checked with :meth:`check`), so this passes."""
        if self.enabled:
            return
        user = _user_of(principal)
        if user.admin or user.id in set(owner_ids):
            return
        raise APIError(
            403, f"permission denied: only an admin or its owner may {action} (basic authorization)"
        )

    def can_anywhere(self, principal: Any, permission: Permission) -> bool:
        """Whether the caller holds ``permission`` cluster-wide or on at least one workspace
        (e.g. own access tokens, which upstream grants with workspace roles too)."""
        if not self.enabled:
            return _basic_allows(principal, permission)
        grants = self.grants(principal)
        return permission in grants.cluster or any(
            permission in perms for perms in grants.workspaces.values()
        )

    def visible_workspace_ids(
        self, principal: Any, permission: Permission = Permission.VIEW_EXPERIMENT_METADATA
    ) -> set[int] | None:
        """Workspaces where the caller holds ``permission``; ``None`` when it holds it everywhere
        (admins, cluster-wide roles, RBAC off) so listings need no filter."""
        if not self.enabled:
            return None
        grants = self.grants(principal)
        if permission in grants.cluster:
            return None
        return {ws for ws, perms in grants.workspaces.items() if permission in perms}

    has = can
    """Alias of :meth:`can`."""

    visible_workspaces = visible_workspace_ids
    """Alias of :meth:`visible_workspace_ids`."""

    def workspace_of_project(self, project_id: int) -> int | None:
        """The workspace a project belongs to (cached; None for an unknown project)."""
        ws = self._project_ws.get(project_id)
        if ws is not None:
            return ws
        from determined.master.db import Project

        generation = self._generation
        with self._db.read() as session:
            ws = session.scalar(select(Project.workspace_id).where(Project.id == project_id))
        if ws is not None:
            with self._lock:
                if generation == self._generation:
                    self._project_ws[project_id] = ws
        return ws

    def check_project(self, principal: Any, permission: Permission, project_id: int) -> None:
        """:meth:`check` on the workspace of a project (404 for an unknown project)."""
        ws = self.workspace_of_project(project_id)
        if ws is None:
            raise APIError(404, f"project {project_id} not found")
        self.check(principal, permission, ws)

    def assign_creator(self, session: Any, workspace_id: int, principal: Any) -> None:
        """Make the (non-admin) creator of a new workspace its WorkspaceAdmin, as upstream's
        ``workspace_creator_assign_role``; call inside the transaction that creates it."""
        user = _user_of(principal)
        if user.admin:
            return
        from determined.master.db import RoleAssignment

        session.add(RoleAssignment(user_id=user.id, role_id=2, workspace_id=workspace_id))

    # --- resolution and cache ------------------------------------------------------------------

    def _resolve(self, user_id: int) -> Grants:
        from determined.master.db import RoleAssignment, UserGroupMembership

        cluster: set[Permission] = set()
        workspaces: dict[int, set[Permission]] = {}
        if self.default_role is not None:
            workspaces[DEFAULT_WORKSPACE_ID] = set(self.default_role.permissions)
        with self._db.read() as session:
            groups = select(UserGroupMembership.group_id).where(
                UserGroupMembership.user_id == user_id
            )
            rows = session.execute(
                select(RoleAssignment.role_id, RoleAssignment.workspace_id).where(
                    (RoleAssignment.user_id == user_id) | RoleAssignment.group_id.in_(groups)
                )
            ).all()
        for role_id, ws in rows:
            role = ROLES.get(role_id)
            if role is None:
                continue
            if ws is None:
                cluster |= role.permissions
            else:
                workspaces.setdefault(ws, set()).update(role.permissions)
        return Grants(frozenset(cluster), {k: frozenset(v) for k, v in workspaces.items()})

    def invalidate(self) -> None:
        """Drop every cached grant (after writes the flush listener cannot see, e.g. raw SQL)."""
        with self._lock:
            self._generation += 1
            self._grants = {}
            self._project_ws = {}

    def _watched(self) -> tuple[type, ...]:
        if self._watched_types is None:
            from determined.master import db

            self._watched_types = (
                db.User,
                db.UserGroup,
                db.UserGroupMembership,
                db.RoleAssignment,
                db.Project,
                db.Workspace,
            )
        return self._watched_types

    def _after_flush(self, session: Any, _context: Any) -> None:
        watched = self._watched()
        for obj in (*session.new, *session.dirty, *session.deleted):
            if isinstance(obj, watched):
                session.info["authz_dirty"] = True
                self.invalidate()
                return

    def _after_commit(self, session: Any) -> None:
        if session.info.pop("authz_dirty", False):
            self.invalidate()
