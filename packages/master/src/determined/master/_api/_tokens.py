"""Access tokens: upstream 0.38's ``/api/v1/tokens`` routes (create, search, edit or revoke)."""

from __future__ import annotations

from typing import Any

from fastapi import Depends, Request

from determined.master._api._commands import page
from determined.master._api._deps import (
    Principal,
    authenticate,
    bool_param,
    int_param,
    json_body,
    tokens_of,
)
from determined.master._api._json_route import api_router
from determined.master._wire import APIError, get

router = api_router()


@router.post("/api/v1/tokens", tags=["Tokens"])
def post_access_token(
    request: Request,
    body: dict[str, Any] = Depends(json_body),
    principal: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """Create an access token for ``userId`` (yourself, or anyone for an admin): ``{token,
    tokenId}``. ``lifespan`` is a Go duration (``"720h"``) or ``"-1"`` for the maximum."""
    user_id = int_param(get(body, "user_id"), "userId")
    if user_id is None:
        raise APIError(400, "userId: required")
    lifespan = get(body, "lifespan")
    if lifespan is not None and not isinstance(lifespan, str):
        raise APIError(400, "lifespan: must be a duration string such as '48h'")
    description = get(body, "description") or ""
    if not isinstance(description, str):
        raise APIError(400, "description: must be a string")
    token, token_id = tokens_of(request).create(principal.user, user_id, lifespan, description)
    return {"token": token, "tokenId": token_id}


@router.get("/api/v1/tokens", tags=["Tokens"])
def get_access_tokens(
    request: Request, principal: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """Access tokens you may see (all for admins), without their secrets: ``tokenIds``,
    ``username``, ``showInactive``, ``sortBy``, ``orderBy``, ``offset``, ``limit``."""
    q = request.query_params
    ids = [
        int_param(v, "tokenIds") or 0
        for raw in q.getlist("tokenIds") + q.getlist("token_ids")
        for v in str(raw).split(",")
        if v.strip()
    ]
    infos = tokens_of(request).search(
        principal.user,
        token_ids=ids,
        username=q.get("username") or None,
        show_inactive=bool_param(q.get("showInactive") or q.get("show_inactive")),
        sort_by=q.get("sortBy") or "SORT_BY_UNSPECIFIED",
        descending=q.get("orderBy") == "ORDER_BY_DESC",
    )
    shown, pages = page(request, infos)
    return {"tokenInfo": shown, "pagination": pages}


@router.patch("/api/v1/tokens/{token_id}", tags=["Tokens"])
def patch_access_token(
    request: Request,
    token_id: int,
    body: dict[str, Any] = Depends(json_body),
    principal: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """Change an active token's ``description`` and/or revoke it (``setRevoked: true``)."""
    description = get(body, "description")
    if description is not None and not isinstance(description, str):
        raise APIError(400, "description: must be a string")
    revoke = get(body, "set_revoked", False)
    if not isinstance(revoke, bool):
        raise APIError(400, "setRevoked: must be true or false")
    info = tokens_of(request).patch(principal.user, token_id, description, revoke)
    return {"tokenInfo": info}
