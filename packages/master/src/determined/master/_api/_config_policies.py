"""Config-policy routes (upstream's ``/api/v1/config-policies/...``): put, get and delete the
global or one workspace's policies of a workload type (``EXPERIMENT`` or ``NTSC``).

The body of a PUT carries the policies as YAML or JSON text (``configPolicies``); the answers
carry them as an object. Who may change them: admins for the global ones; for a workspace's,
holders of ``MODIFY_WORKSPACE_CONFIG_POLICIES`` there (WorkspaceAdmin) or, under basic
authorization, admins and the workspace's owner, as upstream. Reading follows the same
permissions' ``VIEW_`` twins (everybody under basic authorization).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from fastapi import Depends, Request

from determined.master._api._deps import (
    Principal,
    authenticate,
    authz_of,
    json_body,
    master_of,
)
from determined.master._api._json_route import api_router
from determined.master._api._yaml_input import load_yaml
from determined.master._core._authz import Permission
from determined.master._core._config_policies import workload_type as parse_workload_type
from determined.master._task_container_defaults import with_experiment_defaults
from determined.master._wire import APIError, get
from determined.master.db import Workspace

if TYPE_CHECKING:
    from determined.master._core._config_policies import ConfigPolicies

router = api_router(tags=["Alpha"])

P = Permission


def policies_of(request: Request) -> ConfigPolicies:
    """The config-policies service."""
    return master_of(request).manager.config_policies


def _parse(body: dict[str, Any]) -> Any:
    """The ``configPolicies`` of a PUT body: YAML or JSON text (an object is taken as it is)."""
    text = get(body, "config_policies")
    if text is None or (isinstance(text, str) and not text.strip()):
        raise APIError(400, "configPolicies: required (YAML or JSON text)")
    if isinstance(text, dict):
        return text
    if not isinstance(text, str):
        raise APIError(400, "configPolicies: must be YAML or JSON text")
    try:
        return json.loads(text)
    except RecursionError:
        raise APIError(400, "configPolicies: the JSON document is nested too deeply") from None
    except ValueError:
        return load_yaml(text, "configPolicies")


def _workspace_owner(request: Request, workspace_id: int) -> int | None:
    with master_of(request).db.read() as session:
        ws = session.get(Workspace, workspace_id)
        if ws is None:
            raise APIError(404, f"workspace {workspace_id} not found")
        return ws.user_id


def _guard_workspace(request: Request, p: Principal, workspace_id: int, modify: bool) -> None:
    """404 for a workspace the caller cannot see, 403 when it may see but not do this."""
    owner = _workspace_owner(request, workspace_id)
    authz = authz_of(request)
    if not authz.enabled:  # upstream's basic rules
        if modify and not (p.user.admin or owner == p.user.id):
            raise APIError(
                403,
                "permission denied: only admins and the workspace's owner may set config"
                f" policies for workspace {workspace_id}",
            )
        return
    wanted = P.MODIFY_WORKSPACE_CONFIG_POLICIES
    if modify and authz.can(p, wanted, workspace_id):
        return
    if not modify and (
        authz.can(p, P.VIEW_WORKSPACE_CONFIG_POLICIES, workspace_id)
        or authz.can(p, wanted, workspace_id)
    ):
        return
    if authz.can(p, P.VIEW_WORKSPACE, workspace_id):
        authz.check(p, wanted if modify else P.VIEW_WORKSPACE_CONFIG_POLICIES, workspace_id)
    raise APIError(404, f"workspace {workspace_id} not found")


def _guard_global(request: Request, p: Principal, modify: bool) -> None:
    authz = authz_of(request)
    if not modify and not authz.enabled:  # upstream's basic rules: everybody may read them
        return
    authz.check(p, P.MODIFY_GLOBAL_CONFIG_POLICIES if modify else P.VIEW_GLOBAL_CONFIG_POLICIES)


@router.put("/api/v1/config-policies/workspaces/{workspace_id}/{workload_type}")
def put_workspace_config_policies(
    request: Request,
    workspace_id: int,
    workload_type: str,
    body: dict[str, Any] = Depends(json_body),
    p: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """Replace a workspace's policies of one workload type."""
    kind = parse_workload_type(workload_type)
    _guard_workspace(request, p, workspace_id, modify=True)
    saved = policies_of(request).put(workspace_id, kind, _parse(body), p.user.id)
    return {"configPolicies": saved}


@router.put("/api/v1/config-policies/global/{workload_type}")
def put_global_config_policies(
    request: Request,
    workload_type: str,
    body: dict[str, Any] = Depends(json_body),
    p: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """Replace the global policies of one workload type (admins)."""
    kind = parse_workload_type(workload_type)
    _guard_global(request, p, modify=True)
    return {"configPolicies": policies_of(request).put(None, kind, _parse(body), p.user.id)}


@router.get("/api/v1/config-policies/workspaces/{workspace_id}/{workload_type}")
def get_workspace_config_policies(
    request: Request, workspace_id: int, workload_type: str, p: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """A workspace's policies of one workload type (``{}`` when none are set)."""
    kind = parse_workload_type(workload_type)
    _guard_workspace(request, p, workspace_id, modify=False)
    return {"configPolicies": policies_of(request).get(workspace_id, kind)}


@router.get("/api/v1/config-policies/global/{workload_type}")
def get_global_config_policies(
    request: Request, workload_type: str, p: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """The global policies of one workload type (``{}`` when none are set)."""
    kind = parse_workload_type(workload_type)
    _guard_global(request, p, modify=False)
    return {"configPolicies": policies_of(request).get(None, kind)}


@router.delete("/api/v1/config-policies/workspaces/{workspace_id}/{workload_type}")
def delete_workspace_config_policies(
    request: Request, workspace_id: int, workload_type: str, p: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """Drop a workspace's policies of one workload type."""
    kind = parse_workload_type(workload_type)
    _guard_workspace(request, p, workspace_id, modify=True)
    policies_of(request).delete(workspace_id, kind)
    return {}


@router.delete("/api/v1/config-policies/global/{workload_type}")
def delete_global_config_policies(
    request: Request, workload_type: str, p: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """Drop the global policies of one workload type (admins)."""
    kind = parse_workload_type(workload_type)
    _guard_global(request, p, modify=True)
    policies_of(request).delete(None, kind)
    return {}


def shape_experiment(request: Request, raw: Any, workspace_id: int | None, pool: str) -> Any:
    """An experiment config (YAML text or a mapping, before validation) with the config
    policies' invariant configs merged over it and the pool's ``task_container_defaults``
    under it; ``raw`` itself when neither applies."""
    master = master_of(request)
    defaults = master.config.task_container_defaults_for(pool)
    policies = policies_of(request)
    config = load_yaml(raw, "config") if isinstance(raw, str) else raw
    if not isinstance(config, dict):
        return raw
    shaped = with_experiment_defaults(policies.experiment_config(workspace_id, config), defaults)
    return raw if shaped == config else shaped
