"""Role assignments: the built-in roles of ``_authz`` given to users and groups, cluster-wide or on
one workspace, in upstream's ``determined.rbac.v1`` wire shapes.

Assigning needs ``ASSIGN_ROLES`` where the role lands (the workspace, or cluster-wide for a
cluster-wide assignment); assigning the same role twice is a no-op; removing an assignment that does
not exist is a 404 naming it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from determined.master._core._authz import (
    DEFAULT_WORKSPACE_ID,
    ROLES,
    Authz,
    Permission,
    Role,
    role_by_id,
)
from determined.master._wire import APIError, get
from determined.master.db import Database, RoleAssignment, User, UserGroup, Workspace


@dataclasses.dataclass(frozen=True)
class Assignment:
    """One requested assignment: a role to a user or a group, cluster-wide or on a workspace."""

    role: Role
    workspace_id: int | None
    user_id: int | None = None
    group_id: int | None = None


def _int_field(value: Any, field: str) -> int:
    if isinstance(value, bool):
        raise APIError(400, f"{field}: must be an integer")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise APIError(400, f"{field}: must be an integer, got {value!r}") from None


def parse_assignments(body: dict[str, Any]) -> list[Assignment]:
    """The ``userRoleAssignments`` and ``groupRoleAssignments`` of an AssignRoles or
    RemoveAssignments request; 400 naming the field at fault."""
    out: list[Assignment] = []
    for key, who in (("userRoleAssignments", "userId"), ("groupRoleAssignments", "groupId")):
        items = get(body, key) or []
        if not isinstance(items, list):
            raise APIError(400, f"{key}: must be a list")
        for i, item in enumerate(items):
            where = f"{key}[{i}]"
            if not isinstance(item, dict):
                raise APIError(400, f"{where}: must be an object")
            if get(item, who) is None:
                raise APIError(400, f"{where}.{who}: required")
            principal = _int_field(get(item, who), f"{where}.{who}")
            ra = get(item, "role_assignment")
            if not isinstance(ra, dict):
                raise APIError(400, f"{where}.roleAssignment: required")
            role_obj = get(ra, "role")
            if not isinstance(role_obj, dict) or get(role_obj, "role_id") is None:
                raise APIError(400, f"{where}.roleAssignment.role.roleId: required")
            role = role_by_id(get(role_obj, "role_id"), f"{where}.roleAssignment.role.roleId")
            ws_raw = get(ra, "scope_workspace_id")
            ws = None if ws_raw in (None, 0) else _int_field(ws_raw, f"{where}.scopeWorkspaceId")
            if ws is not None and not role.workspace_assignable:
                raise APIError(
                    400,
                    f"{where}.scopeWorkspaceId: role {role.name} can only be assigned cluster-wide",
                )
            if who == "userId":
                out.append(Assignment(role, ws, user_id=principal))
            else:
                out.append(Assignment(role, ws, group_id=principal))
    if not out:
        raise APIError(400, "userRoleAssignments/groupRoleAssignments: no assignment given")
    return out


def summary(rows: list[tuple[int, int | None]]) -> list[dict[str, Any]]:
    """Upstream's ``RoleAssignmentSummary`` list from (role id, workspace id or None) pairs."""
    by_role: dict[int, dict[str, Any]] = {}
    for role_id, ws in rows:
        entry = by_role.setdefault(
            role_id, {"roleId": role_id, "scopeWorkspaceIds": [], "scopeCluster": False}
        )
        if ws is None:
            entry["scopeCluster"] = True
        elif ws not in entry["scopeWorkspaceIds"]:
            entry["scopeWorkspaceIds"].append(ws)
    for entry in by_role.values():
        entry["isGlobal"] = entry["scopeCluster"]
        entry["scopeWorkspaceIds"].sort()
    return [by_role[k] for k in sorted(by_role)]


class Roles:
    """The built-in roles, their assignments, and what a user holds."""

    def __init__(self, db: Database, authz: Authz) -> None:
        self._db = db
        self._authz = authz

    # --- roles ---------------------------------------------------------------------------------

    @staticmethod
    def list_roles(
        offset: int, limit: int, workspace_id: int | None = None
    ) -> tuple[list[dict[str, Any]], int]:
        """Built-in roles by id (only the workspace-assignable ones when ``workspace_id`` is set):
        (page of ``v1Role``, total)."""
        if offset < 0 or limit < 0:
            raise APIError(400, "offset/limit: must be >= 0")
        roles = [r for r in ROLES.values() if workspace_id is None or r.workspace_assignable]
        page = roles[offset : offset + limit] if limit else roles[offset:]
        return [r.to_json() for r in page], len(roles)

    def by_ids(self, role_ids: Any) -> list[dict[str, Any]]:
        """``RoleWithAssignments`` of each role id (404 naming an unknown one)."""
        if not isinstance(role_ids, list):
            raise APIError(400, "roleIds: must be a list of role ids")
        roles = [role_by_id(r, "roleIds") for r in role_ids]
        with self._db.read() as session:
            rows = session.scalars(
                select(RoleAssignment).where(RoleAssignment.role_id.in_([r.id for r in roles]))
            ).all()
        return [
            self._with_assignments(role, [a for a in rows if a.role_id == role.id])
            for role in roles
        ]

    # --- assignments ---------------------------------------------------------------------------

    def check_may_assign(self, principal: Any, assignments: list[Assignment]) -> None:
        """403 unless the caller holds ASSIGN_ROLES where each assignment lands."""
        for a in assignments:
            self._authz.check(principal, Permission.ASSIGN_ROLES, a.workspace_id)

    def assign(self, assignments: list[Assignment]) -> None:
        """Add each assignment that does not exist yet (all or none)."""
        with self._db.write() as session:
            for a in assignments:
                self._require_targets(session, a)
                if self._existing(session, a) is None:
                    session.add(
                        RoleAssignment(
                            role_id=a.role.id,
                            user_id=a.user_id,
                            group_id=a.group_id,
                            workspace_id=a.workspace_id,
                        )
                    )
        self._authz.invalidate()

    def remove(self, assignments: list[Assignment]) -> None:
        """Remove each assignment (all or none); 404 naming one that does not exist."""
        with self._db.write() as session:
            for a in assignments:
                row = self._existing(session, a)
                if row is None:
                    who = f"user {a.user_id}" if a.user_id is not None else f"group {a.group_id}"
                    where = (
                        "cluster-wide"
                        if a.workspace_id is None
                        else f"on workspace {a.workspace_id}"
                    )
                    raise APIError(404, f"{who} has no role {a.role.name} {where}")
                session.execute(delete(RoleAssignment).where(RoleAssignment.id == row))
        self._authz.invalidate()

    # --- what users and groups hold ------------------------------------------------------------

    def of_user(self, user_id: int) -> list[dict[str, Any]]:
        """``RoleWithAssignments`` of every role assigned to a user, directly or through groups."""
        from determined.master.db import UserGroupMembership

        with self._db.read() as session:
            if session.get(User, user_id) is None:
                raise APIError(404, f"user {user_id} not found")
            groups = select(UserGroupMembership.group_id).where(
                UserGroupMembership.user_id == user_id
            )
            rows = session.scalars(
                select(RoleAssignment).where(
                    (RoleAssignment.user_id == user_id) | RoleAssignment.group_id.in_(groups)
                )
            ).all()
        out = []
        for role_id in sorted({a.role_id for a in rows}):
            if role_id in ROLES:
                mine = [a for a in rows if a.role_id == role_id]
                out.append(self._with_assignments(ROLES[role_id], mine))
        return out

    def of_group(self, group_id: int) -> dict[str, Any]:
        """``{"roles": [v1Role], "assignments": [RoleAssignmentSummary]}`` of a group."""
        with self._db.read() as session:
            if session.get(UserGroup, group_id) is None:
                raise APIError(404, f"group {group_id} not found")
            rows = session.execute(
                select(RoleAssignment.role_id, RoleAssignment.workspace_id).where(
                    RoleAssignment.group_id == group_id
                )
            ).all()
        pairs = [(r, w) for r, w in rows if r in ROLES]
        roles = [ROLES[r].to_json() for r in sorted({r for r, _ in pairs})]
        return {"roles": roles, "assignments": summary(pairs)}

    def of_workspace(self, workspace_id: int) -> dict[str, Any]:
        """Who holds roles on a workspace (``GetGroupsAndUsersAssignedToWorkspace``): ``groups``,
        ``usersAssignedDirectly`` and ``assignments`` (``RoleWithAssignments`` per role)."""
        from determined.master._wire import ts

        with self._db.read() as session:
            if session.get(Workspace, workspace_id) is None:
                raise APIError(404, f"workspace {workspace_id} not found")
            rows = session.scalars(
                select(RoleAssignment).where(RoleAssignment.workspace_id == workspace_id)
            ).all()
            group_ids = {a.group_id for a in rows if a.group_id is not None}
            user_ids = {a.user_id for a in rows if a.user_id is not None}
            groups = session.scalars(select(UserGroup).where(UserGroup.id.in_(group_ids))).all()
            users = session.scalars(select(User).where(User.id.in_(user_ids))).all()
        return {
            "groups": [
                {"groupId": g.id, "name": g.name} for g in sorted(groups, key=lambda g: g.id)
            ],
            "usersAssignedDirectly": [
                {
                    "id": u.id,
                    "username": u.username,
                    "displayName": u.display_name or "",
                    "admin": u.admin,
                    "active": u.active,
                    "modifiedAt": ts(u.modified_at),
                }
                for u in sorted(users, key=lambda u: u.id)
            ],
            "assignments": [
                self._with_assignments(ROLES[r], [a for a in rows if a.role_id == r])
                for r in sorted({a.role_id for a in rows})
                if r in ROLES
            ],
        }

    def permissions_summary(self, principal: Any) -> dict[str, Any]:
        """What the caller holds: ``{"roles": [v1Role], "assignments": [RoleAssignmentSummary]}``,
        the implicit ones included (admin → ClusterAdmin; the default workspace's role)."""
        from determined.master.db import UserGroupMembership

        user = getattr(principal, "user", principal)
        pairs: list[tuple[int, int | None]] = []
        if user.admin:
            pairs.append((1, None))
        elif self._authz.default_role is not None:
            pairs.append((self._authz.default_role.id, DEFAULT_WORKSPACE_ID))
        with self._db.read() as session:
            groups = select(UserGroupMembership.group_id).where(
                UserGroupMembership.user_id == user.id
            )
            rows = session.execute(
                select(RoleAssignment.role_id, RoleAssignment.workspace_id).where(
                    (RoleAssignment.user_id == user.id) | RoleAssignment.group_id.in_(groups)
                )
            ).all()
        pairs += [(r, w) for r, w in rows if r in ROLES]
        roles = [ROLES[r].to_json() for r in sorted({r for r, _ in pairs})]
        return {"roles": roles, "assignments": summary(pairs)}

    # --- helpers -------------------------------------------------------------------------------

    @staticmethod
    def _with_assignments(role: Role, rows: list[RoleAssignment]) -> dict[str, Any]:
        def scope(a: RoleAssignment) -> dict[str, Any]:
            out: dict[str, Any] = {"role": role.to_json(), "scopeCluster": a.workspace_id is None}
            if a.workspace_id is not None:
                out["scopeWorkspaceId"] = a.workspace_id
            return out

        return {
            "role": role.to_json(),
            "groupRoleAssignments": [
                {"groupId": a.group_id, "roleAssignment": scope(a)}
                for a in rows
                if a.group_id is not None
            ],
            "userRoleAssignments": [
                {"userId": a.user_id, "roleAssignment": scope(a)}
                for a in rows
                if a.user_id is not None
            ],
        }

    @staticmethod
    def _require_targets(session: Session, a: Assignment) -> None:
        if a.user_id is not None and session.get(User, a.user_id) is None:
            raise APIError(404, f"userId: user {a.user_id} not found")
        if a.group_id is not None and session.get(UserGroup, a.group_id) is None:
            raise APIError(404, f"groupId: group {a.group_id} not found")
        if a.workspace_id is not None and session.get(Workspace, a.workspace_id) is None:
            raise APIError(404, f"scopeWorkspaceId: workspace {a.workspace_id} not found")

    @staticmethod
    def _existing(session: Session, a: Assignment) -> int | None:
        stmt = select(RoleAssignment.id).where(RoleAssignment.role_id == a.role.id)
        stmt = stmt.where(
            RoleAssignment.user_id.is_(None)
            if a.user_id is None
            else RoleAssignment.user_id == a.user_id
        )
        stmt = stmt.where(
            RoleAssignment.group_id.is_(None)
            if a.group_id is None
            else RoleAssignment.group_id == a.group_id
        )
        stmt = stmt.where(
            RoleAssignment.workspace_id.is_(None)
            if a.workspace_id is None
            else RoleAssignment.workspace_id == a.workspace_id
        )
        return session.scalar(stmt.limit(1))
