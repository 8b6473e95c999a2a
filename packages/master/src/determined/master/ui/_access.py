"""What the signed-in user may see and do, for the UI: the master's RBAC (``Authz``) asked once
per page.

Pages show only what the user may see (other workspaces' objects answer 404) and only the buttons
the user's roles allow; the REST API checks again on every action, so a forced action still gets
the API's 403 and its message.
"""

from __future__ import annotations

from typing import Any

from fastapi import Request

from determined.master._api._deps import Principal, authz_of
from determined.master._core._authz import Permission

ACTIONS: dict[str, Permission] = {
    "update": Permission.UPDATE_EXPERIMENT,
    "metadata": Permission.UPDATE_EXPERIMENT_METADATA,
    "delete": Permission.DELETE_EXPERIMENT,
    "tensorboard": Permission.CREATE_NSC,
    "create_experiment": Permission.CREATE_EXPERIMENT,
    "create_project": Permission.CREATE_PROJECT,
    "update_project": Permission.UPDATE_PROJECT,
    "update_workspace": Permission.UPDATE_WORKSPACE,
}
"""The UI's names for the permissions its buttons need."""


def visible_workspaces(
    request: Request,
    principal: Principal,
    permission: Permission = Permission.VIEW_EXPERIMENT_METADATA,
) -> set[int] | None:
    """Workspace ids whose objects the user may see (``None``: all of them)."""
    return authz_of(request).visible_workspace_ids(principal, permission)


def allowed(request: Request, principal: Principal, workspace_id: int | None) -> dict[str, bool]:
    """``{action name: allowed}`` for the buttons of a page about ``workspace_id``."""
    authz = authz_of(request)
    return {name: authz.can(principal, p, workspace_id) for name, p in ACTIONS.items()}


def can_create_workspace(request: Request, principal: Principal) -> bool:
    """Whether the "New workspace" form is shown (a cluster-wide permission)."""
    return authz_of(request).can(principal, Permission.CREATE_WORKSPACE, None)


def permissions(request: Request, principal: Principal, workspace_id: int) -> dict[str, Any]:
    """The user's permissions on a workspace, as upstream's wire names (``PERMISSION_TYPE_...``),
    and the UI's action names allowed there."""
    authz = authz_of(request)
    held = [p.wire_name for p in Permission if authz.can(principal, p, workspace_id)]
    return {
        "workspaceId": workspace_id,
        "permissions": held,
        "actions": allowed(request, principal, workspace_id),
    }
