"""Workspace routes: upstream's ``/api/v1/workspaces`` API (list, create, get, patch, delete,
archive, unarchive, pin, unpin, the projects of a workspace and the pools available to it).

Bodies and answers are upstream's ``v1Workspace`` family; each setting of a workspace needs its
own permission (name: ``UPDATE_WORKSPACE``, agent user/group, checkpoint storage and default pools
their ``SET_WORKSPACE_*`` permission), checked through the one authorization API. A workspace the
caller cannot see answers 404, as if it did not exist.
"""

from __future__ import annotations

from typing import Any

from fastapi import Depends, Request

from determined.master._api._access import P, require_workspace, visible
from determined.master._api._deps import (
    Principal,
    authenticate,
    authz_of,
    int_param,
    json_body,
    master_of,
    tasks_of,
)
from determined.master._api._json_route import api_router
from determined.master._core._workspaces import (
    UNSET,
    WorkspaceFields,
    Workspaces,
    find_workspace,
)
from determined.master._limits import check_storage_roots
from determined.master._wire import APIError, get, pagination, sub_object

router = api_router(tags=["Workspaces"])

_AGENT_INTS = ("agent_uid", "agent_gid")
_AGENT_STRS = ("agent_user", "agent_group")


def _check_owner(request: Request, p: Principal, workspace_id: int, action: str) -> None:
    """Basic authorization's rule (RBAC off): only an admin or the workspace's owner may rename,
    archive, unarchive or delete it, or set its checkpoint storage (403); 404 for no workspace.
    Editing the default workspace is refused by the service first (a 400, as upstream)."""
    with master_of(request).db.read() as session:
        row = find_workspace(session, workspace_id)
        owner, immutable = row.user_id, bool(row.immutable)
    if action == "edit" and immutable:
        return
    authz_of(request).check_owner(p, [owner], f"{action} workspace {workspace_id}")


def workspaces_of(request: Request) -> Workspaces:
    """The workspaces service."""
    return master_of(request).manager.workspaces


def _query_bool(request: Request, name: str) -> bool | None:
    value = request.query_params.get(name)
    if value in (None, ""):
        return None
    if value.lower() not in ("true", "false", "1", "0"):
        raise APIError(400, f"{name}: must be true or false, got {value!r}")
    return value.lower() in ("true", "1")


def _query_ints(request: Request, name: str) -> list[int]:
    return [int(int_param(v, name) or 0) for v in request.query_params.getlist(name)]


def _page(request: Request) -> tuple[int, int]:
    q = request.query_params
    return int(int_param(q.get("offset"), "offset", 0) or 0), int(
        int_param(q.get("limit"), "limit", 0) or 0
    )


def _agent_user_group(value: Any, field: str) -> Any:
    """Upstream's ``v1AgentUserGroup`` (camelCase keys kept); ``{}`` clears it."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise APIError(
            400, f"{field}: must be an object with agentUid, agentGid, agentUser, agentGroup"
        )
    out: dict[str, Any] = {}
    for key in (*_AGENT_INTS, *_AGENT_STRS):
        camel = "agent" + key.split("_")[1].capitalize()
        item = get(value, key)
        if item is None:
            continue
        if key in _AGENT_INTS:
            if isinstance(item, bool) or not isinstance(item, int) or item < 0:
                raise APIError(400, f"{field}.{camel}: must be an integer >= 0, got {item!r}")
        elif not isinstance(item, str) or not item:
            raise APIError(400, f"{field}.{camel}: must be a non-empty string, got {item!r}")
        out[camel] = item
    unknown = set(value) - {
        n for k in (*_AGENT_INTS, *_AGENT_STRS) for n in (k, "agent" + k.split("_")[1].capitalize())
    }
    if unknown:
        raise APIError(400, f"{field}: unknown fields {sorted(unknown)}")
    return out or None


def _storage(value: Any, field: str) -> Any:
    """A complete ``checkpoint_storage`` config (checked as an experiment's); ``{}`` clears it."""
    if value is None or value == {}:
        return None
    if not isinstance(value, dict):
        raise APIError(400, f"{field}: must be a checkpoint_storage object")
    import determined.config as expconf

    probe = {
        "checkpoint_storage": value,
        "searcher": {"name": "single", "metric": "loss", "max_length": {"batches": 1}},
    }
    try:
        expconf.validate_experiment_config(probe, require_entrypoint=False)
    except expconf.InvalidConfigError as e:
        problems = [
            field + m[len("checkpoint_storage") :]
            for m in e.errors
            if m.startswith("checkpoint_storage")
        ]
        raise APIError(400, "; ".join(problems) or f"{field}: {e}") from None
    return dict(value)


def _pool(request: Request, value: Any, field: str) -> Any:
    if value is None:
        return UNSET
    if not isinstance(value, str):
        raise APIError(400, f"{field}: must be a string")
    pools = sorted(master_of(request).rm.queue_state())
    if value and value not in pools:
        raise APIError(
            400, f"{field}: resource pool {value!r} does not exist (pools: {', '.join(pools)})"
        )
    return value


def _fields(request: Request, body: dict[str, Any], prefix: str, *, patch: bool) -> WorkspaceFields:
    """The settable fields a create or patch body names, validated (400 naming the field); a
    field sent as null is left as it is, as upstream's clients send every unset field so."""
    pre = f"{prefix}." if prefix else ""
    values: dict[str, Any] = {}
    if body.get("name") is not None:
        values["name"] = body["name"]
    for key, check in (
        ("agent_user_group", _agent_user_group),
        ("checkpoint_storage_config", _storage),
    ):
        camel = "agentUserGroup" if key == "agent_user_group" else "checkpointStorageConfig"
        raw = get(body, key)
        if raw is not None:  # null leaves it as it is (protojson's unset message); {} clears it
            values[key] = check(raw, pre + camel)
            if key == "checkpoint_storage_config":
                roots = master_of(request).config.storage_roots()
                check_storage_roots(values[key], roots, pre + camel)
    pools = (
        ("default_compute_pool", ("default_compute_resource_pool", "default_compute_pool")),
        ("default_aux_pool", ("default_aux_resource_pool", "default_aux_pool")),
    )
    for key, names in pools:
        for name in names if patch else names[1:]:
            raw = get(body, name)
            if raw is not None:
                camel = name.split("_")[0] + "".join(p.capitalize() for p in name.split("_")[1:])
                values[key] = _pool(request, raw, pre + camel)
                break
    return WorkspaceFields(**values)


# ---------------------------------------------------------------------------------------------


@router.get("/api/v1/workspaces")
def get_workspaces(request: Request, p: Principal = Depends(authenticate)) -> dict[str, Any]:
    """Workspaces the caller may see, with upstream's filters, sort and pagination."""
    q = request.query_params
    offset, limit = _page(request)
    rows, start, total = workspaces_of(request).list(
        p.user.id,
        name=q.get("name"),
        name_case_sensitive=q.get("nameCaseSensitive") or q.get("name_case_sensitive"),
        archived=_query_bool(request, "archived"),
        pinned=_query_bool(request, "pinned"),
        users=q.getlist("users"),
        user_ids=_query_ints(request, "userIds"),
        sort_by=q.get("sortBy") or "SORT_BY_ID",
        order_by=q.get("orderBy") or "ORDER_BY_ASC",
        offset=offset,
        limit=limit,
        workspace_ids=visible(request, p, P.VIEW_WORKSPACE),
    )
    return {"workspaces": rows, "pagination": pagination(start, limit, len(rows), total)}


@router.post("/api/v1/workspaces")
def post_workspace(
    request: Request,
    body: dict[str, Any] = Depends(json_body),
    p: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """Create a workspace (``CREATE_WORKSPACE``; setting its agent user/group or checkpoint
    storage needs those permissions cluster-wide, as upstream)."""
    authz = authz_of(request)
    authz.check(p, P.CREATE_WORKSPACE)
    if body.get("name") is None:
        raise APIError(400, "name: required")
    fields = _fields(request, body, "", patch=False)
    if fields.agent_user_group not in (UNSET, None):
        authz.check(p, P.SET_WORKSPACE_AGENT_USER_GROUP)
    if fields.checkpoint_storage_config not in (UNSET, None):
        authz.check(p, P.SET_WORKSPACE_CHECKPOINT_STORAGE_CONFIG)
    workspace = workspaces_of(request).create(fields, p.user)
    return {"workspace": workspace, "namespaceBindings": {}}


@router.get("/api/v1/workspaces/{workspace_id}")
def get_workspace(
    request: Request, workspace_id: int, p: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """One workspace (404 when the caller cannot see it)."""
    require_workspace(request, p, workspace_id, P.VIEW_WORKSPACE)
    return {"workspace": workspaces_of(request).get(workspace_id, p.user.id)}


@router.patch("/api/v1/workspaces/{workspace_id}")
def patch_workspace(
    request: Request,
    workspace_id: int,
    body: dict[str, Any] = Depends(json_body),
    p: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """Rename a workspace or change its agent user/group, checkpoint storage or default pools."""
    require_workspace(request, p, workspace_id, P.VIEW_WORKSPACE)
    patch = sub_object(body, "workspace")
    fields = _fields(request, patch, "workspace", patch=True)
    authz = authz_of(request)
    needed = (
        (fields.name, P.UPDATE_WORKSPACE),
        (fields.agent_user_group, P.SET_WORKSPACE_AGENT_USER_GROUP),
        (fields.checkpoint_storage_config, P.SET_WORKSPACE_CHECKPOINT_STORAGE_CONFIG),
        (fields.default_compute_pool, P.SET_WORKSPACE_DEFAULT_RESOURCE_POOL),
        (fields.default_aux_pool, P.SET_WORKSPACE_DEFAULT_RESOURCE_POOL),
    )
    for value, permission in needed:
        if value is not UNSET:
            authz.check(p, permission, workspace_id)
    if fields.name is not UNSET or fields.checkpoint_storage_config is not UNSET:
        _check_owner(request, p, workspace_id, "edit")
    return {"workspace": workspaces_of(request).patch(workspace_id, fields, p.user.id)}


@router.delete("/api/v1/workspaces/{workspace_id}")
def delete_workspace(
    request: Request, workspace_id: int, p: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """Delete a workspace with its projects, their finished experiments and its templates;
    its running commands, notebooks, TensorBoards and shells are stopped (as upstream)."""
    require_workspace(request, p, workspace_id, P.DELETE_WORKSPACE)
    _check_owner(request, p, workspace_id, "delete")
    stop = tasks_of(request).stop
    return {"completed": workspaces_of(request).delete(workspace_id, p.user, stop)}


@router.post("/api/v1/workspaces/{workspace_id}/archive")
def archive_workspace(
    request: Request, workspace_id: int, p: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """Archive a workspace (its projects take no new experiments)."""
    require_workspace(request, p, workspace_id, P.UPDATE_WORKSPACE)
    _check_owner(request, p, workspace_id, "archive")
    workspaces_of(request).set_archived(workspace_id, True)
    return {}


@router.post("/api/v1/workspaces/{workspace_id}/unarchive")
def unarchive_workspace(
    request: Request, workspace_id: int, p: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """Unarchive a workspace."""
    require_workspace(request, p, workspace_id, P.UPDATE_WORKSPACE)
    _check_owner(request, p, workspace_id, "unarchive")
    workspaces_of(request).set_archived(workspace_id, False)
    return {}


@router.post("/api/v1/workspaces/{workspace_id}/pin")
def pin_workspace(
    request: Request, workspace_id: int, p: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """Pin a workspace for the calling user."""
    require_workspace(request, p, workspace_id, P.VIEW_WORKSPACE)
    workspaces_of(request).pin(workspace_id, p.user.id, True)
    return {}


@router.post("/api/v1/workspaces/{workspace_id}/unpin")
def unpin_workspace(
    request: Request, workspace_id: int, p: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """Unpin a workspace for the calling user."""
    require_workspace(request, p, workspace_id, P.VIEW_WORKSPACE)
    workspaces_of(request).pin(workspace_id, p.user.id, False)
    return {}


@router.get("/api/v1/workspaces/{workspace_id}/projects")
def get_workspace_projects(
    request: Request, workspace_id: int, p: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """The projects of a workspace (of every visible workspace for id 0), upstream's filters."""
    q = request.query_params
    if workspace_id != 0:
        require_workspace(request, p, workspace_id, P.VIEW_WORKSPACE)
        workspaces_of(request).get(workspace_id)
    offset, limit = _page(request)
    visible_ids = visible(request, p, P.VIEW_PROJECT)
    sort_by = q.get("sortBy") or "SORT_BY_ID"
    rows, total = master_of(request).manager.projects.list_in_workspace(
        workspace_id or None,
        name=q.get("name"),
        archived=_query_bool(request, "archived"),
        users=q.getlist("users"),
        user_ids=_query_ints(request, "userIds"),
        sort_by="SORT_BY_ID" if sort_by == "SORT_BY_UNSPECIFIED" else sort_by,
        order_by=q.get("orderBy") or "ORDER_BY_ASC",
        offset=max(offset, 0),
        limit=limit,
        workspace_ids=sorted(visible_ids) if visible_ids is not None else None,
    )
    return {"projects": rows, "pagination": pagination(max(offset, 0), limit, len(rows), total)}


@router.get("/api/v1/workspaces/{workspace_id}/available-resource-pools")
def list_rps_bound_to_workspace(
    request: Request, workspace_id: int, p: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """The resource pools a workspace's tasks may use (every pool: det has no pool bindings)."""
    require_workspace(request, p, workspace_id, P.VIEW_WORKSPACE)
    workspaces_of(request).get(workspace_id)
    pools = sorted(master_of(request).rm.queue_state())
    offset, limit = _page(request)
    page = pools[offset : offset + limit] if limit > 0 else pools[offset:]
    return {"resourcePools": page, "pagination": pagination(offset, limit, len(page), len(pools))}
