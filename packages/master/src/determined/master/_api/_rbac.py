"""User groups, roles and role assignments (upstream's ``UserGroup`` and ``RBAC`` API routes).

Group changes need ``UPDATE_GROUP`` cluster-wide; assigning or removing a role needs
``ASSIGN_ROLES`` where the role lands; reading groups and roles needs only a login.
"""

from __future__ import annotations

from typing import Any

from fastapi import Depends, Request

from determined.master._api._deps import (
    Principal,
    authenticate,
    authz_of,
    int_param,
    json_body,
    master_of,
)
from determined.master._api._json_route import api_router
from determined.master._core._authz import Permission
from determined.master._core._groups import Groups
from determined.master._core._roles import Roles, parse_assignments
from determined.master._wire import APIError, get, pagination

router = api_router()


def _groups(request: Request) -> Groups:
    return master_of(request).manager.groups


def _roles(request: Request) -> Roles:
    return master_of(request).manager.roles


def _path_id(value: str, name: str) -> int:
    out = int_param(value, name)
    assert out is not None
    return out


def _page(body: dict[str, Any]) -> tuple[int, int]:
    offset = int_param(get(body, "offset"), "offset", 0) or 0
    limit = int_param(get(body, "limit"), "limit", 0) or 0
    return offset, limit


# ---- groups ---------------------------------------------------------------------------------------


@router.post("/api/v1/groups", tags=["RBAC"])
def create_group(
    request: Request,
    body: dict[str, Any] = Depends(json_body),
    principal: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """Create a user group (``name``, ``addUsers``): ``{"group", "roles"}``."""
    authz_of(request).check(principal, Permission.UPDATE_GROUP)
    answer = _groups(request).create(get(body, "name"), get(body, "add_users"))
    answer["roles"] = []
    return answer


def _search(request: Request, source: dict[str, Any]) -> dict[str, Any]:
    offset, limit = _page(source)
    name = get(source, "name")
    if name is not None and not isinstance(name, str):
        raise APIError(400, "name: must be a string")
    user_id = int_param(get(source, "user_id"), "userId")
    groups, total = _groups(request).search(name or None, user_id, offset, limit)
    return {"groups": groups, "pagination": pagination(offset, limit, len(groups), total)}


@router.post("/api/v1/groups/search", tags=["RBAC"])
def search_groups(
    request: Request,
    body: dict[str, Any] = Depends(json_body),
    _principal: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """Groups by ``name`` and/or member ``userId``, paged with ``offset``/``limit``."""
    return _search(request, body)


@router.get("/api/v1/groups/search", tags=["RBAC"])
def search_groups_get(
    request: Request, _principal: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """:func:`search_groups` with query parameters."""
    return _search(request, dict(request.query_params))


@router.get("/api/v1/groups/{group_id}", tags=["RBAC"])
def get_group(
    request: Request, group_id: str, _principal: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """One group and its members."""
    return _groups(request).get(_path_id(group_id, "groupId"))


@router.put("/api/v1/groups/{group_id}", tags=["RBAC"])
def update_group(
    request: Request,
    group_id: str,
    body: dict[str, Any] = Depends(json_body),
    principal: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """Rename a group (``name``) and add or remove members (``addUsers``, ``removeUsers``)."""
    authz_of(request).check(principal, Permission.UPDATE_GROUP)
    return _groups(request).update(
        _path_id(group_id, "groupId"),
        get(body, "name"),
        get(body, "add_users"),
        get(body, "remove_users"),
    )


@router.delete("/api/v1/groups/{group_id}", tags=["RBAC"])
def delete_group(
    request: Request, group_id: str, principal: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """Delete a group, its memberships and its role assignments."""
    authz_of(request).check(principal, Permission.UPDATE_GROUP)
    _groups(request).delete(_path_id(group_id, "groupId"))
    return {}


# ---- roles ----------------------------------------------------------------------------------------


@router.post("/api/v1/roles/search", tags=["RBAC"])
def list_roles(
    body: dict[str, Any] = Depends(json_body), _principal: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """The built-in roles with their permissions (``ListRoles``)."""
    offset, limit = _page(body)
    roles, total = Roles.list_roles(offset, limit)
    return {"roles": roles, "pagination": pagination(offset, limit, len(roles), total)}


@router.post("/api/v1/roles/search/by-assignability", tags=["RBAC"])
def roles_assignable(
    body: dict[str, Any] = Depends(json_body), _principal: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """Roles that can be assigned on ``workspaceId`` (all when absent)."""
    offset, limit = _page(body)
    workspace_id = int_param(get(body, "workspace_id"), "workspaceId")
    roles, total = Roles.list_roles(offset, limit, workspace_id)
    return {"roles": roles, "pagination": pagination(offset, limit, len(roles), total)}


@router.post("/api/v1/roles/search/by-ids", tags=["RBAC"])
def roles_by_ids(
    request: Request,
    body: dict[str, Any] = Depends(json_body),
    _principal: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """Roles by id with every user and group holding them (``GetRolesByID``)."""
    return {"roles": _roles(request).by_ids(get(body, "role_ids"))}


@router.get("/api/v1/roles/search/by-user/{user_id}", tags=["RBAC"])
def roles_of_user(
    request: Request, user_id: str, _principal: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """Roles assigned to a user, directly or through groups (``GetRolesAssignedToUser``)."""
    return {"roles": _roles(request).of_user(_path_id(user_id, "userId"))}


@router.get("/api/v1/roles/search/by-group/{group_id}", tags=["RBAC"])
def roles_of_group(
    request: Request, group_id: str, _principal: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """Roles assigned to a group (``GetRolesAssignedToGroup``)."""
    return _roles(request).of_group(_path_id(group_id, "groupId"))


@router.get("/api/v1/roles/workspace/{workspace_id}", tags=["RBAC"])
def roles_on_workspace(
    request: Request, workspace_id: str, principal: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """Groups and users holding roles on a workspace (``GetGroupsAndUsersAssignedToWorkspace``)."""
    ws = _path_id(workspace_id, "workspaceId")
    authz_of(request).check(principal, Permission.VIEW_WORKSPACE, ws)
    return _roles(request).of_workspace(ws)


@router.post("/api/v1/roles/add-assignments", tags=["RBAC"])
def assign_roles(
    request: Request,
    body: dict[str, Any] = Depends(json_body),
    principal: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """Assign roles to users and groups (``userRoleAssignments``, ``groupRoleAssignments``)."""
    assignments = parse_assignments(body)
    roles = _roles(request)
    roles.check_may_assign(principal, assignments)
    roles.assign(assignments)
    return {}


@router.post("/api/v1/roles/remove-assignments", tags=["RBAC"])
def remove_assignments(
    request: Request,
    body: dict[str, Any] = Depends(json_body),
    principal: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """Remove role assignments (the same shape as ``add-assignments``)."""
    assignments = parse_assignments(body)
    roles = _roles(request)
    roles.check_may_assign(principal, assignments)
    roles.remove(assignments)
    return {}


@router.get("/api/v1/permissions/summary", tags=["RBAC"])
def permissions_summary(
    request: Request, principal: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """The caller's roles and where they hold them (``GetPermissionsSummary``)."""
    return _roles(request).permissions_summary(principal)
