"""Webhooks: the resource client for ``/api/v1/webhooks/...``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from determined.client import _routes as r
from determined.client._session import Session


class WebhooksClient:
    """One method per webhook endpoint; each returns the master's JSON answer (a webhook is
    upstream's ``v1Webhook``: ``id``, ``url``, ``webhookType``, ``mode``, ``name``,
    ``workspaceId``, ``triggers``)."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def list(self) -> dict[str, Any]:
        """The webhooks the caller may see (``webhooks``)."""
        return r.call(self.session, r.WEBHOOKS_LIST)

    def create(self, webhook: Mapping[str, Any]) -> dict[str, Any]:
        """A new webhook from a ``v1Webhook`` body (``webhook``)."""
        return r.call(self.session, r.WEBHOOK_CREATE, body=dict(webhook))

    def set_url(self, webhook_id: int, url: str) -> dict[str, Any]:
        """Point a webhook at another URL."""
        return r.call(self.session, r.WEBHOOK_PATCH, body={"url": url}, webhook_id=webhook_id)

    def test(self, webhook_id: int) -> dict[str, Any]:
        """Post a test event to the webhook now (an error when the receiver fails)."""
        return r.call(self.session, r.WEBHOOK_TEST, webhook_id=webhook_id)

    def delete(self, webhook_id: int) -> dict[str, Any]:
        """Remove a webhook."""
        return r.call(self.session, r.WEBHOOK_DELETE, webhook_id=webhook_id)
