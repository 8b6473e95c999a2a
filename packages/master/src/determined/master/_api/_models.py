"""Model registry routes: models, their versions (registered checkpoints), labels, archiving.

Paths and JSON follow upstream's ``/api/v1/models`` API. A model is addressed by its name or, when
the path segment is all digits, by its numeric id (upstream's rule, which is also why model names
may not be all digits). A checkpoint registered as a model version is protected: checkpoint GC,
``DELETE /api/v1/checkpoints`` and experiment deletion leave it alone (see :func:`registered`).
"""

from __future__ import annotations

import re
from typing import Any

from fastapi import Depends, Request
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from determined.master._api import _serialize
from determined.master._api._access import (
    P,
    acting_user,
    on_model,
    require_checkpoint,
    require_workspace,
    visible,
)
from determined.master._api._deps import (
    Principal,
    authenticate,
    bool_param,
    int_param,
    json_body,
    master_of,
    registry_of,
)
from determined.master._api._json_route import api_router
from determined.master._core._model_registry import (
    ModelFields,
    VersionFields,
    find_model,
    find_version,
)
from determined.master._wire import APIError, get, pagination, sub_object, ts
from determined.master.db import Checkpoint, Model, ModelVersion, User
from determined.master.db._visibility import models_visible

router = api_router(tags=["Models"])

WORKSPACE_ID = 1
WORKSPACE_NAME = "Uncategorized"
"""This master has the one default workspace upstream creates."""

MODEL_SORT = {
    "SORT_BY_UNSPECIFIED": lambda m: m["id"],
    "SORT_BY_NAME": lambda m: m["name"].lower(),
    "SORT_BY_DESCRIPTION": lambda m: m["description"].lower(),
    "SORT_BY_CREATION_TIME": lambda m: m["creationTime"] or "",
    "SORT_BY_LAST_UPDATED_TIME": lambda m: m["lastUpdatedTime"] or "",
    "SORT_BY_NUM_VERSIONS": lambda m: m["numVersions"],
    "SORT_BY_WORKSPACE": lambda m: m["workspaceId"],
}
VERSION_SORT = {
    "SORT_BY_UNSPECIFIED": lambda v: v["version"],
    "SORT_BY_VERSION": lambda v: v["version"],
    "SORT_BY_CREATION_TIME": lambda v: v["creationTime"] or "",
}


# ---------------------------------------------------------------------------------------------
# helpers


def valid_name(name: Any, *, field: str) -> str:
    """A valid model name (upstream's rules), or a 400 naming ``field`` (uniqueness is the
    registry's check)."""
    if not isinstance(name, str) or not name.strip():
        raise APIError(400, f"{field}: model names cannot be blank")
    if "  " in name:
        raise APIError(400, f"{field}: model names cannot have excessive spacing")
    if "/" in name or "\\" in name:
        raise APIError(400, f"{field}: model names cannot have slashes")
    if re.fullmatch(r"\d+", name):
        raise APIError(400, f"{field}: model names cannot be only numbers")
    return name


def _labels(value: Any, field: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
        raise APIError(400, f"{field}: must be a list of strings")
    return list(dict.fromkeys(value))


def _metadata(value: Any, field: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise APIError(400, f"{field}: must be an object")
    return value


def _text(value: Any, field: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise APIError(400, f"{field}: must be a string")
    return value


def _workspace(request: Request, body: dict[str, Any]) -> int:
    """The workspace a request names by ``workspaceId`` or ``workspaceName`` (default: 1)."""
    from determined.master.db import Workspace

    ws_id = int_param(get(body, "workspace_id"), "workspaceId")
    ws_name = get(body, "workspace_name")
    with master_of(request).db.read() as session:
        if ws_id:
            if session.get(Workspace, ws_id) is None:
                raise APIError(404, f"workspaceId: workspace {ws_id} not found")
            return ws_id
        if ws_name:
            found = session.scalar(select(Workspace.id).where(Workspace.name == str(ws_name)))
            if found is None:
                raise APIError(404, f"workspaceName: workspace {ws_name!r} not found")
            return int(found)
    return WORKSPACE_ID


def _username(session: Session, user_id: int | None) -> str:
    user = session.get(User, user_id) if user_id is not None else None
    return user.username if user else ""


def model_json(session: Session, row: Model) -> dict[str, Any]:
    """Upstream's ``v1Model``."""
    versions = session.scalar(
        select(func.count(ModelVersion.id)).where(ModelVersion.model_id == row.id)
    )
    return {
        "id": row.id,
        "name": row.name,
        "description": row.description or "",
        "metadata": row.metadata_ or {},
        "creationTime": ts(row.creation_time),
        "lastUpdatedTime": ts(row.last_updated_time),
        "numVersions": int(versions or 0),
        "labels": list(row.labels or []),
        "username": _username(session, row.user_id),
        "userId": row.user_id or 0,
        "archived": bool(row.archived),
        "notes": row.notes or "",
        "workspaceId": row.workspace_id or WORKSPACE_ID,
    }


def _checkpoint_json(session: Session, uuid: str) -> dict[str, Any]:
    ckpt = session.scalar(select(Checkpoint).where(Checkpoint.uuid == uuid))
    if ckpt is not None:
        return _serialize.checkpoint(session, ckpt)
    # Registered checkpoints are never deleted by the master; this covers rows removed by hand.
    return {
        "uuid": uuid,
        "resources": {},
        "metadata": {},
        "state": "STATE_DELETED",
        "training": {},
    }


def version_json(
    session: Session, model: Model, row: ModelVersion, model_out: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Upstream's ``v1ModelVersion``."""
    return {
        "id": row.id,
        "version": row.version,
        "model": model_out if model_out is not None else model_json(session, model),
        "checkpoint": _checkpoint_json(session, row.checkpoint_uuid),
        "name": row.name or "",
        "comment": row.comment or "",
        "notes": row.notes or "",
        "labels": list(row.labels or []),
        "metadata": row.metadata_ or {},
        "creationTime": ts(row.creation_time),
        "lastUpdatedTime": ts(row.last_updated_time or row.creation_time),
        "username": _username(session, row.user_id),
        "userId": row.user_id or 0,
    }


def _page(items: list[Any], offset: int, limit: int) -> list[Any]:
    if offset < 0:
        offset = max(len(items) + offset, 0)
    return items[offset : offset + limit] if limit else items[offset:]


# ---------------------------------------------------------------------------------------------
# models


@router.post("/api/v1/models")
def post_model(
    request: Request,
    body: dict[str, Any] = Depends(json_body),
    principal: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """Create a model: ``{name, description, metadata, labels, notes, workspaceId|Name}``."""
    fields = ModelFields(
        name=valid_name(get(body, "name"), field="name"),
        description=_text(get(body, "description"), "description"),
        metadata=_metadata(get(body, "metadata"), "metadata"),
        labels=_labels(get(body, "labels"), "labels"),
        notes=_text(get(body, "notes"), "notes"),
        workspace_id=_workspace(request, body),
    )
    require_workspace(request, principal, fields.workspace_id or 1, P.CREATE_MODEL_REGISTRY)
    model_id = registry_of(request).create(fields, principal.user.id)
    return _model_response(request, str(model_id))


def _model_response(request: Request, identifier: str) -> dict[str, Any]:
    with master_of(request).db.read() as session:
        return {"model": model_json(session, find_model(session, identifier))}


@router.get("/api/v1/models")
def get_models(request: Request, principal: Principal = Depends(authenticate)) -> dict[str, Any]:
    """List models with upstream's filters, sorting and pagination (``limit`` 0 = all)."""
    q = request.query_params
    offset = int_param(q.get("offset"), "offset", 0) or 0
    limit = int_param(q.get("limit"), "limit", 0) or 0
    if limit < 0:
        raise APIError(400, "limit: must be >= 0")
    sort = q.get("sortBy") or "SORT_BY_UNSPECIFIED"
    if sort not in MODEL_SORT:
        raise APIError(400, f"sortBy: unsupported value {sort!r}")
    order = q.get("orderBy") or "ORDER_BY_ASC"
    if order not in ("ORDER_BY_UNSPECIFIED", "ORDER_BY_ASC", "ORDER_BY_DESC"):
        raise APIError(400, f"orderBy: unsupported value {order!r}")
    stmt = select(Model).where(models_visible(visible(request, principal, P.VIEW_MODEL_REGISTRY)))
    model_id = int_param(q.get("id"), "id")
    if model_id:
        stmt = stmt.where(Model.id == model_id)
    if q.get("archived") not in (None, ""):
        stmt = stmt.where(Model.archived.is_(bool_param(q.get("archived"))))
    if q.get("name"):
        stmt = stmt.where(func.lower(Model.name).contains(q["name"].lower(), autoescape=True))
    if q.get("description"):
        stmt = stmt.where(
            func.lower(Model.description).contains(q["description"].lower(), autoescape=True)
        )
    user_ids = [int_param(u, "userIds") for u in q.getlist("userIds") if u]
    workspace_ids = [int_param(w, "workspaceIds") for w in q.getlist("workspaceIds") if w]
    workspace_names = [w for w in q.getlist("workspaceNames") if w]
    wanted_labels = set(filter(None, q.getlist("labels")))
    users = [u for u in q.getlist("users") if u]
    with master_of(request).db.read() as session:
        if users:
            user_ids += list(session.scalars(select(User.id).where(User.username.in_(users))))
            if not user_ids:
                stmt = stmt.where(Model.id.is_(None))
        if user_ids:
            stmt = stmt.where(Model.user_id.in_(user_ids))
        if workspace_ids:
            stmt = stmt.where(Model.workspace_id.in_(workspace_ids))
        if workspace_names:
            from determined.master.db import Workspace

            named = select(Workspace.id).where(Workspace.name.in_(workspace_names))
            stmt = stmt.where(Model.workspace_id.in_(named))
        rows = list(session.scalars(stmt.order_by(Model.id)))
        if wanted_labels:
            rows = [r for r in rows if wanted_labels <= set(r.labels or [])]
        models = [model_json(session, r) for r in rows]
    models.sort(key=MODEL_SORT[sort], reverse=order == "ORDER_BY_DESC")
    page = _page(models, offset, limit)
    return {"models": page, "pagination": pagination(offset, limit, len(page), len(models))}


@router.get("/api/v1/model/labels")
def get_model_labels(
    request: Request, principal: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """Every label used on a model, most used first."""
    counts: dict[str, int] = {}
    with master_of(request).db.read() as session:
        shown = models_visible(visible(request, principal, P.VIEW_MODEL_REGISTRY))
        for labels in session.scalars(select(Model.labels).where(shown)):
            for label in labels or []:
                counts[label] = counts.get(label, 0) + 1
    return {"labels": sorted(counts, key=lambda label: (-counts[label], label))}


@router.get("/api/v1/models/{model_name}", dependencies=[on_model(P.VIEW_MODEL_REGISTRY)])
def get_model(
    request: Request, model_name: str, principal: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """One model, by name or numeric id."""
    with master_of(request).db.read() as session:
        return {"model": model_json(session, find_model(session, model_name))}


@router.patch("/api/v1/models/{model_name}", dependencies=[on_model(P.EDIT_MODEL_REGISTRY)])
def patch_model(
    request: Request,
    model_name: str,
    body: dict[str, Any] = Depends(json_body),
    principal: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """Change a model's name, description, notes, metadata, labels or workspace (the body is
    upstream's ``PatchModel``, bare or wrapped in ``{"model": ...}``)."""
    patch = sub_object(body, "model")
    name = get(patch, "name")
    workspace_given = (
        get(patch, "workspace_id") is not None or get(patch, "workspace_name") is not None
    )
    fields = ModelFields(
        name=valid_name(name, field="model.name") if name is not None else None,
        description=_optional(get(patch, "description"), _text, "model.description"),
        notes=_optional(get(patch, "notes"), _text, "model.notes"),
        metadata=_optional(get(patch, "metadata"), _metadata, "model.metadata"),
        labels=_optional(get(patch, "labels"), _labels, "model.labels"),
        workspace_id=_workspace(request, patch) if workspace_given else None,
    )
    if fields.workspace_id is not None:
        require_workspace(request, principal, fields.workspace_id, P.CREATE_MODEL_REGISTRY)
    model_id = registry_of(request).change(model_name, fields)
    return _model_response(request, str(model_id))


def _optional(value: Any, parse: Any, field: str) -> Any:
    return parse(value, field) if value is not None else None


def _set_archived(request: Request, model_name: str, archived: bool) -> dict[str, Any]:
    registry_of(request).set_archived(model_name, archived)
    return {}


@router.post("/api/v1/models/{model_name}/archive", dependencies=[on_model(P.EDIT_MODEL_REGISTRY)])
def archive_model(
    request: Request, model_name: str, principal: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """Archive a model: it can no longer be changed or get new versions."""
    return _set_archived(request, model_name, True)


@router.post(
    "/api/v1/models/{model_name}/unarchive", dependencies=[on_model(P.EDIT_MODEL_REGISTRY)]
)
def unarchive_model(
    request: Request, model_name: str, principal: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """Unarchive a model."""
    return _set_archived(request, model_name, False)


@router.post("/api/v1/models/{model_name}/move", dependencies=[on_model(P.EDIT_MODEL_REGISTRY)])
def move_model(
    request: Request,
    model_name: str,
    body: dict[str, Any] = Depends(json_body),
    principal: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """Move a model to another workspace (``destinationWorkspaceId``)."""
    destination = int_param(get(body, "destination_workspace_id"), "destinationWorkspaceId")
    if destination is None:
        raise APIError(400, "destinationWorkspaceId: required")
    workspace_id = _workspace(request, {"workspaceId": destination})
    require_workspace(request, principal, workspace_id, P.CREATE_MODEL_REGISTRY)
    registry_of(request).move(model_name, workspace_id)
    return {}


@router.delete("/api/v1/models/{model_name}", dependencies=[on_model(P.DELETE_MODEL_REGISTRY)])
def delete_model(
    request: Request, model_name: str, principal: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """Delete a model and its versions (the owner or an admin); the checkpoints stay."""
    registry_of(request).delete(model_name, acting_user(request, principal, model=model_name))
    return {}


# ---------------------------------------------------------------------------------------------
# versions


@router.get("/api/v1/models/{model_name}/versions", dependencies=[on_model(P.VIEW_MODEL_REGISTRY)])
def get_model_versions(
    request: Request, model_name: str, principal: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """The versions of a model (sorted by version unless ``sortBy`` says otherwise)."""
    q = request.query_params
    offset = int_param(q.get("offset"), "offset", 0) or 0
    limit = int_param(q.get("limit"), "limit", 0) or 0
    if limit < 0:
        raise APIError(400, "limit: must be >= 0")
    sort = q.get("sortBy") or "SORT_BY_UNSPECIFIED"
    if sort not in VERSION_SORT:
        raise APIError(400, f"sortBy: unsupported value {sort!r}")
    desc = q.get("orderBy") == "ORDER_BY_DESC"
    with master_of(request).db.read() as session:
        model = find_model(session, model_name)
        model_out = model_json(session, model)
        rows = session.scalars(
            select(ModelVersion)
            .where(ModelVersion.model_id == model.id)
            .order_by(ModelVersion.version)
        )
        versions = [version_json(session, model, r, model_out) for r in rows]
    versions.sort(key=VERSION_SORT[sort], reverse=desc)
    page = _page(versions, offset, limit)
    return {
        "model": model_out,
        "modelVersions": page,
        "pagination": pagination(offset, limit, len(page), len(versions)),
    }


@router.post("/api/v1/models/{model_name}/versions", dependencies=[on_model(P.EDIT_MODEL_REGISTRY)])
def post_model_version(
    request: Request,
    model_name: str,
    body: dict[str, Any] = Depends(json_body),
    principal: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """Register a COMPLETED checkpoint as the model's next version:
    ``{checkpointUuid, name, comment, notes, labels, metadata}``."""
    uuid = get(body, "checkpoint_uuid")
    if not isinstance(uuid, str) or not uuid:
        raise APIError(400, "checkpointUuid: required")
    require_checkpoint(request, principal, uuid, P.VIEW_EXPERIMENT_ARTIFACTS)
    fields = VersionFields(
        name=_text(get(body, "name"), "name"),
        comment=_text(get(body, "comment"), "comment"),
        notes=_text(get(body, "notes"), "notes"),
        labels=_labels(get(body, "labels"), "labels"),
        metadata=_metadata(get(body, "metadata"), "metadata"),
    )
    number = registry_of(request).register_version(model_name, uuid, fields, principal.user.id)
    return _version_response(request, model_name, number)


def _version_response(request: Request, model_name: str, number: int) -> dict[str, Any]:
    with master_of(request).db.read() as session:
        model, row = find_version(session, model_name, number)
        return {"modelVersion": version_json(session, model, row)}


@router.get(
    "/api/v1/models/{model_name}/versions/{version}", dependencies=[on_model(P.VIEW_MODEL_REGISTRY)]
)
def get_model_version(
    request: Request, model_name: str, version: int, principal: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """One version of a model."""
    with master_of(request).db.read() as session:
        model, row = find_version(session, model_name, version)
        return {"modelVersion": version_json(session, model, row)}


@router.patch(
    "/api/v1/models/{model_name}/versions/{version}", dependencies=[on_model(P.EDIT_MODEL_REGISTRY)]
)
def patch_model_version(
    request: Request,
    model_name: str,
    version: int,
    body: dict[str, Any] = Depends(json_body),
    principal: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """Change a version's name, comment, notes, labels or metadata (upstream's
    ``PatchModelVersion``, bare or wrapped in ``{"modelVersion": ...}``)."""
    patch = sub_object(body, "model_version")
    fields = VersionFields(
        name=_optional(get(patch, "name"), _text, "modelVersion.name"),
        comment=_optional(get(patch, "comment"), _text, "modelVersion.comment"),
        notes=_optional(get(patch, "notes"), _text, "modelVersion.notes"),
        labels=_optional(get(patch, "labels"), _labels, "modelVersion.labels"),
        metadata=_optional(get(patch, "metadata"), _metadata, "modelVersion.metadata"),
    )
    registry_of(request).change_version(model_name, version, fields)
    return _version_response(request, model_name, version)


@router.delete(
    "/api/v1/models/{model_name}/versions/{version}",
    dependencies=[on_model(getattr(P, "DELETE_MODEL_VERSION", P.DELETE_MODEL_REGISTRY))],
)
def delete_model_version(
    request: Request, model_name: str, version: int, principal: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """Delete a version (its registrant or an admin); the checkpoint stays."""
    registry_of(request).delete_version(
        model_name, version, acting_user(request, principal, model=model_name)
    )
    return {}
