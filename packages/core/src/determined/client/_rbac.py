"""User groups and role-based access control: the resource clients for ``/api/v1/groups...``,
``/api/v1/roles/...`` and ``/api/v1/permissions/summary``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from determined.client import _routes as r
from determined.client._session import Session


class GroupsClient:
    """One method per user-group endpoint; each returns the master's JSON answer."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def create(self, name: str, add_users: Iterable[int] = ()) -> dict[str, Any]:
        """A new group with these member ids: ``group`` (``groupId``, ``name``, ``users``)."""
        body = {"name": name, "addUsers": list(add_users)}
        return r.call(self.session, r.GROUP_CREATE, body=body)

    def search(
        self,
        name: str | None = None,
        user_id: int | None = None,
        offset: int = 0,
        limit: int = 0,
    ) -> dict[str, Any]:
        """Groups by exact name and/or member: ``groups`` (``group``, ``numMembers``), ``pagination``."""
        body: dict[str, Any] = {"offset": offset, "limit": limit}
        if name is not None:
            body["name"] = name
        if user_id is not None:
            body["userId"] = user_id
        return r.call(self.session, r.GROUPS_SEARCH, body=body)

    def get(self, group_id: int) -> dict[str, Any]:
        """One group with its members: ``group``."""
        return r.call(self.session, r.GROUP_GET, group_id=group_id)

    def update(
        self,
        group_id: int,
        name: str | None = None,
        add_users: Iterable[int] = (),
        remove_users: Iterable[int] = (),
    ) -> dict[str, Any]:
        """Rename a group and/or add and remove members: ``group``."""
        body: dict[str, Any] = {
            "groupId": group_id,
            "addUsers": list(add_users),
            "removeUsers": list(remove_users),
        }
        if name is not None:
            body["name"] = name
        return r.call(self.session, r.GROUP_UPDATE, body=body, group_id=group_id)

    def delete(self, group_id: int) -> dict[str, Any]:
        """Delete a group with its memberships and role assignments."""
        return r.call(self.session, r.GROUP_DELETE, group_id=group_id)


def assignment(role_id: int, workspace_id: int | None = None) -> dict[str, Any]:
    """Upstream's ``v1RoleAssignment``: a role, cluster-wide or on one workspace."""
    out: dict[str, Any] = {"role": {"roleId": role_id}}
    if workspace_id is not None:
        out["scopeWorkspaceId"] = workspace_id
    return out


class RbacClient:
    """Roles, role assignments and the caller's permissions."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def list_roles(self, offset: int = 0, limit: int = 0) -> dict[str, Any]:
        """Every built-in role with its permissions: ``roles``, ``pagination``."""
        return r.call(self.session, r.ROLES_LIST, body={"offset": offset, "limit": limit})

    def roles_assignable(
        self, workspace_id: int | None = None, offset: int = 0, limit: int = 0
    ) -> dict[str, Any]:
        """Roles that can be assigned on ``workspace_id`` (every role when None)."""
        body: dict[str, Any] = {"offset": offset, "limit": limit}
        if workspace_id is not None:
            body["workspaceId"] = workspace_id
        return r.call(self.session, r.ROLES_ASSIGNABLE, body=body)

    def roles_by_ids(self, role_ids: Iterable[int]) -> dict[str, Any]:
        """``roles``: each role with the users and groups it is assigned to."""
        return r.call(self.session, r.ROLES_BY_IDS, body={"roleIds": list(role_ids)})

    def roles_of_user(self, user_id: int) -> dict[str, Any]:
        """``roles`` assigned to a user, directly or through groups."""
        return r.call(self.session, r.ROLES_OF_USER, user_id=user_id)

    def roles_of_group(self, group_id: int) -> dict[str, Any]:
        """``roles`` and ``assignments`` of a group."""
        return r.call(self.session, r.ROLES_OF_GROUP, group_id=group_id)

    def roles_on_workspace(self, workspace_id: int) -> dict[str, Any]:
        """``groups``, ``usersAssignedDirectly`` and ``assignments`` holding roles on a workspace."""
        return r.call(self.session, r.ROLES_ON_WORKSPACE, workspace_id=workspace_id)

    def assign(
        self,
        role_id: int,
        *,
        user_id: int | None = None,
        group_id: int | None = None,
        workspace_id: int | None = None,
    ) -> dict[str, Any]:
        """Assign a role to one user or group, cluster-wide or on a workspace."""
        return r.call(
            self.session,
            r.ROLES_ASSIGN,
            body=_assignments(role_id, user_id, group_id, workspace_id),
        )

    def unassign(
        self,
        role_id: int,
        *,
        user_id: int | None = None,
        group_id: int | None = None,
        workspace_id: int | None = None,
    ) -> dict[str, Any]:
        """Remove a role assignment of one user or group."""
        return r.call(
            self.session,
            r.ROLES_REMOVE,
            body=_assignments(role_id, user_id, group_id, workspace_id),
        )

    def permissions_summary(self) -> dict[str, Any]:
        """The caller's ``roles`` and ``assignments`` (where each role holds)."""
        return r.call(self.session, r.PERMISSIONS_SUMMARY)


def _assignments(
    role_id: int, user_id: int | None, group_id: int | None, workspace_id: int | None
) -> dict[str, Any]:
    if (user_id is None) == (group_id is None):
        raise ValueError("give exactly one of user_id and group_id")
    ra = assignment(role_id, workspace_id)
    if user_id is not None:
        return {"userRoleAssignments": [{"userId": user_id, "roleAssignment": ra}]}
    return {"groupRoleAssignments": [{"groupId": group_id, "roleAssignment": ra}]}
