"""Config-template routes (upstream's ``Templates`` service): list, get, create, upsert, change the
config, rename, delete."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import Depends, Request

from determined.master._api._access import require_workspace, visible
from determined.master._api._deps import (
    Principal,
    authenticate,
    authz_of,
    int_param,
    json_body,
    master_of,
)
from determined.master._api._json_route import api_router
from determined.master._api._yaml_input import load_yaml
from determined.master._core._authz import Permission
from determined.master._wire import APIError, get, pagination
from determined.master.db import DEFAULT_WORKSPACE_ID

if TYPE_CHECKING:
    from determined.master._core._templates import Templates

router = api_router(tags=["Templates"])


def templates_of(request: Request) -> Templates:
    """The config-templates service."""
    return master_of(request).manager.templates


def _guard(request: Request, principal: Principal, name: str, permission: Permission) -> None:
    """404 for a template the caller cannot see, 403 naming ``permission`` when it may only look."""
    workspace_id = templates_of(request).workspace_of(name)
    authz = authz_of(request)
    if authz.can(principal, permission, workspace_id):
        return
    if permission is not Permission.VIEW_TEMPLATES and authz.can(
        principal, Permission.VIEW_TEMPLATES, workspace_id
    ):
        authz.check(principal, permission, workspace_id)
    raise APIError(404, f"template {name!r} not found")


def _workspace_guard(
    request: Request, principal: Principal, workspace_id: int | None, permission: Permission
) -> None:
    require_workspace(request, principal, workspace_id or DEFAULT_WORKSPACE_ID, permission)


def _config(value: Any, field: str = "config") -> dict[str, Any]:
    if not isinstance(value, dict):
        raise APIError(400, f"{field}: must be an object (the template's experiment config)")
    return value


def _template_body(body: dict[str, Any], name: str) -> tuple[dict[str, Any] | None, int | None]:
    """The ``v1Template`` of a POST/PUT body (bare, or wrapped in ``template``)."""
    template = get(body, "template")
    template = template if isinstance(template, dict) else body
    given = get(template, "name")
    if given not in (None, "", name):
        raise APIError(400, f"name: the body names {given!r} but the path names {name!r}")
    config = get(template, "config")
    workspace_id = int_param(get(template, "workspace_id"), "workspaceId")
    return (None if config is None else _config(config)), workspace_id


@router.get("/api/v1/templates")
def list_templates(
    request: Request, principal: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """Templates sorted by name, with upstream's ``name``, ``workspaceIds``, ``orderBy``,
    ``offset`` and ``limit`` (0 = all)."""
    q = request.query_params
    offset = int_param(q.get("offset"), "offset", 0) or 0
    limit = int_param(q.get("limit"), "limit", 0) or 0
    if offset < 0 or limit < 0:
        raise APIError(400, "offset, limit: must be >= 0")
    order = q.get("orderBy") or "ORDER_BY_UNSPECIFIED"
    if order not in ("ORDER_BY_UNSPECIFIED", "ORDER_BY_ASC", "ORDER_BY_DESC"):
        raise APIError(400, f"orderBy: unsupported value {order!r}")
    sort = q.get("sortBy") or "SORT_BY_UNSPECIFIED"
    if sort not in ("SORT_BY_UNSPECIFIED", "SORT_BY_NAME"):
        raise APIError(400, f"sortBy: unsupported value {sort!r}")
    workspace_ids = [int_param(w, "workspaceIds") or 0 for w in q.getlist("workspaceIds") if w]
    allowed = visible(request, principal, Permission.VIEW_TEMPLATES)
    if allowed is not None:
        workspace_ids = [w for w in workspace_ids if w in allowed] if workspace_ids else [*allowed]
        if not workspace_ids:
            return {"templates": [], "pagination": pagination(offset, limit, 0, 0)}
    rows, total = templates_of(request).list(
        name=q.get("name") or None,
        workspace_ids=workspace_ids or None,
        descending=order == "ORDER_BY_DESC",
        offset=offset,
        limit=limit,
    )
    return {"templates": rows, "pagination": pagination(offset, limit, len(rows), total)}


@router.get("/api/v1/templates/{template_name}")
def get_template(
    request: Request, template_name: str, principal: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """One template by name."""
    _guard(request, principal, template_name, Permission.VIEW_TEMPLATES)
    return {"template": templates_of(request).get(template_name)}


@router.post("/api/v1/templates/{template_name}")
def post_template(
    request: Request,
    template_name: str,
    body: dict[str, Any] = Depends(json_body),
    principal: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """Create a template (``workspaceId`` 0 or absent: the default workspace); 409 if taken."""
    config, workspace_id = _template_body(body, template_name)
    if config is None:
        raise APIError(400, "config: required (the template's experiment config)")
    _workspace_guard(request, principal, workspace_id, Permission.CREATE_TEMPLATES)
    return {"template": templates_of(request).create(template_name, config, workspace_id)}


@router.put("/api/v1/templates/{template_name}")
def put_template(
    request: Request,
    template_name: str,
    body: dict[str, Any] = Depends(json_body),
    principal: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """Create or update a template (upstream's deprecated upsert)."""
    config, workspace_id = _template_body(body, template_name)
    try:
        current: int | None = templates_of(request).workspace_of(template_name)
    except APIError:
        current = None
    if current is not None:
        _guard(request, principal, template_name, Permission.UPDATE_TEMPLATES)
    if current is None or workspace_id:
        _workspace_guard(request, principal, workspace_id, Permission.CREATE_TEMPLATES)
    return {"template": templates_of(request).put(template_name, config, workspace_id)}


@router.patch("/api/v1/templates/{template_name}")
def patch_template_config(
    request: Request,
    template_name: str,
    body: dict[str, Any] = Depends(json_body),
    principal: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """Replace a template's config; the body is the config itself."""
    _guard(request, principal, template_name, Permission.UPDATE_TEMPLATES)
    return {"template": templates_of(request).set_config(template_name, _config(body, "body"))}


@router.patch("/api/v1/template/rename")
def patch_template_name(
    request: Request,
    body: dict[str, Any] = Depends(json_body),
    principal: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """Rename a template: ``{oldName, newName}``."""
    old_name, new_name = get(body, "old_name"), get(body, "new_name")
    if not isinstance(old_name, str) or not old_name:
        raise APIError(400, "oldName: required")
    if not isinstance(new_name, str) or not new_name:
        raise APIError(400, "newName: required")
    _guard(request, principal, old_name, Permission.UPDATE_TEMPLATES)
    return {"template": templates_of(request).rename(old_name, new_name)}


@router.delete("/api/v1/templates/{template_name}")
def delete_template(
    request: Request, template_name: str, principal: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """Remove a template."""
    _guard(request, principal, template_name, Permission.DELETE_TEMPLATES)
    templates_of(request).delete(template_name)
    return {}


def with_template(
    request: Request, principal: Principal, raw: Any, template: Any
) -> dict[str, Any]:
    """An experiment config (YAML text or a mapping) merged over the template it names, as
    ``POST /api/v1/experiments`` with ``template`` does; 400/404 naming the field (a template
    the caller may not view is not found)."""
    if not isinstance(template, str):
        raise APIError(400, "template: must be the name of a config template")
    try:
        _guard(request, principal, template, Permission.VIEW_TEMPLATES)
    except APIError as e:
        raise APIError(e.status, f"template: {e.message}") from None
    if isinstance(raw, str):
        raw = load_yaml(raw, "config") if raw.strip() else {}
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise APIError(400, "config: the experiment configuration must be a YAML mapping")
    return templates_of(request).apply(template, raw)
