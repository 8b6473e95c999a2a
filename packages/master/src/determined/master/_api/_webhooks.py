"""Webhook routes (upstream's ``Webhooks`` service): list, create, delete, change the URL, test.

The custom-trigger route ``POST /api/v1/webhooks/custom`` (``core.alert()``) lives with the other
routes running trials call, in ``_tasks.py``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import Depends, Request

from determined.master._api._deps import Principal, authenticate, json_body, master_of
from determined.master._api._json_route import api_router
from determined.master._wire import sub_object

if TYPE_CHECKING:
    from determined.master._core._webhooks import Webhooks

router = api_router(tags=["Webhooks"])


def webhooks_of(request: Request) -> Webhooks:
    """The webhooks service."""
    return master_of(request).manager.webhooks


@router.get("/api/v1/webhooks")
def get_webhooks(request: Request, p: Principal = Depends(authenticate)) -> dict[str, Any]:
    """Global webhooks and those of the workspaces the caller manages (admins: all)."""
    return {"webhooks": webhooks_of(request).list_for(p)}


@router.post("/api/v1/webhooks")
def post_webhook(
    request: Request,
    body: dict[str, Any] = Depends(json_body),
    p: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """Create a webhook (the body is a ``v1Webhook``, bare or wrapped in ``webhook``)."""
    return {"webhook": webhooks_of(request).create(p, sub_object(body, "webhook"))}


@router.delete("/api/v1/webhooks/{webhook_id}")
def delete_webhook(
    request: Request, webhook_id: int, p: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """Delete a webhook and its triggers."""
    webhooks_of(request).delete(p, webhook_id)
    return {}


@router.patch("/api/v1/webhooks/{webhook_id}")
def patch_webhook(
    request: Request,
    webhook_id: int,
    body: dict[str, Any] = Depends(json_body),
    p: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """Change a webhook's URL (``v1PatchWebhook``: ``{"url": ...}``)."""
    webhooks_of(request).patch(p, webhook_id, body)
    return {}


@router.post("/api/v1/webhooks/{webhook_id}/test")
def test_webhook(
    request: Request, webhook_id: int, p: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """Post a test event to the webhook now; 400 saying why when the receiver fails."""
    webhooks_of(request).test(p, webhook_id)
    return {"completed": True}
