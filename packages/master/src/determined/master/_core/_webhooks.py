"""The webhooks service: webhooks and their triggers, and the events they send.

A webhook is a URL, a type (``DEFAULT``: Determined's JSON event; ``SLACK``: a Slack message), a
scope (global, or one workspace) and a mode (``WORKSPACE``: every experiment in scope;
``SPECIFIC``: only experiments whose config names it under ``integrations.webhooks``). Its
triggers say when it fires:

    EXPERIMENT_STATE_CHANGE    {"state": "COMPLETED"}: an experiment entered that state
    TASK_LOG                   {"regex": "..."}: a task's log line matched (once per task)
    CUSTOM                     ``core.alert()`` of a trial whose experiment names the webhook
    METRIC_THRESHOLD_EXCEEDED  accepted and stored; never fires (as upstream)

:class:`Webhooks` is the service the master and the REST routes use: management here, with its
parts in sibling modules: the in-memory snapshot of webhooks and the scope rule
(``_webhook_snapshot``), checking REST bodies (``_webhook_validation``), noticing what fires and
the planning thread (``_webhook_events``), which webhooks an event reaches and what it posts
(``_webhook_planning``), the payloads (``_webhook_payloads``) and delivery
(``_webhook_delivery``).

Who may manage webhooks follows upstream's basic rules: admins manage global webhooks and every
workspace's; a workspace's owner manages its webhooks. With RBAC, ``EDIT_WEBHOOKS`` held
cluster-wide manages all, ``UPDATE_WORKSPACE`` on a workspace (WorkspaceAdmin) manages its own.
"""

from __future__ import annotations

import secrets
from typing import Any

from sqlalchemy import delete, select

from determined.master._core._authz import Authz, Permission
from determined.master._core._webhook_delivery import DeliveryError, WebhookShipper
from determined.master._core._webhook_events import WebhookEvents
from determined.master._core._webhook_payloads import dumps, ping_event
from determined.master._core._webhook_snapshot import Hook, WebhookRegistry
from determined.master._core._webhook_validation import check_url, parse_webhook
from determined.master._wire import APIError, get
from determined.master.db import Database, Workspace
from determined.master.db._webhook_models import Webhook, WebhookTrigger


class Webhooks:
    """Webhooks: their management, and the events they send (see the module docstring)."""

    def __init__(
        self, db: Database, authz: Authz, signing_key: str | None = None, base_url: str = ""
    ) -> None:
        self._db = db
        self._authz = authz
        key = (signing_key or secrets.token_hex(32)).encode()
        self.shipper = WebhookShipper(db, key)
        self._registry = WebhookRegistry(db)
        self._registry.reload()
        self._events = WebhookEvents(db, self._registry, self.shipper)
        self.base_url = base_url

    @property
    def base_url(self) -> str:
        """The web UI's address for links in Slack messages ('' for none)."""
        return self._events.base_url

    @base_url.setter
    def base_url(self, value: str) -> None:
        self._events.base_url = value.rstrip("/")

    def configure(self, settings: dict[str, Any] | None) -> None:
        """Apply the master config's ``webhooks`` section: ``signing_key`` (the HMAC key of the
        signature header; a random one per start when unset, as upstream) and ``base_url`` (the
        web UI's address for links in Slack messages)."""
        settings = settings or {}
        if not isinstance(settings, dict):
            raise ValueError("webhooks: must be a mapping with signing_key and base_url")
        unknown = set(settings) - {"signing_key", "base_url"}
        if unknown:
            raise ValueError(f"webhooks: unknown settings {sorted(unknown)}")
        key, base_url = settings.get("signing_key"), settings.get("base_url")
        if key is not None:
            if not isinstance(key, str) or not key:
                raise ValueError("webhooks.signing_key: must be a non-empty string")
            self.shipper.signing_key = key.encode()
        if base_url is not None:
            if not isinstance(base_url, str):
                raise ValueError("webhooks.base_url: must be a URL")
            self.base_url = base_url

    # --- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        """Start planning events (and deliver those a previous run left queued)."""
        if self._events.start():
            self.shipper.resend_pending()

    def stop(self) -> None:
        """Stop planning and delivering; undelivered events wait in the queue table."""
        self._events.stop()
        self.shipper.close()

    def wait_idle(self, timeout: float = 10.0) -> None:
        """Block until the jobs queued so far are planned (tests)."""
        self._events.wait_idle(timeout)

    def reload(self) -> None:
        """Read every webhook into the in-memory snapshot the event paths use."""
        self._registry.reload()

    # --- events ----------------------------------------------------------------------------------

    def scan_logs(self, lines: list[tuple[str, str, str | None]]) -> None:
        """Match stored log lines ``(task id, text, node)`` against the TASK_LOG triggers."""
        self._events.scan_logs(lines)

    def custom(self, experiment_id: int, trial_id: int | None, data: dict[str, Any]) -> None:
        """``core.alert()``: send ``data`` to the CUSTOM triggers of the webhooks the experiment
        names in ``integrations.webhooks``."""
        self._events.custom(experiment_id, trial_id, data)

    # --- management (the REST routes) ----------------------------------------------------------

    def can_edit(self, principal: Any, workspace_id: int | None) -> bool:
        """Whether the caller may manage webhooks of ``workspace_id`` (None: global ones)."""
        user = getattr(principal, "user", principal)
        if user.admin:
            return True
        if self._authz.enabled:
            if self._authz.can(principal, Permission.EDIT_WEBHOOKS):
                return True
            return workspace_id is not None and self._authz.can(
                principal, Permission.UPDATE_WORKSPACE, workspace_id
            )
        if workspace_id is None:
            return False
        with self._db.read() as session:
            owner = session.scalar(select(Workspace.user_id).where(Workspace.id == workspace_id))
        return owner is not None and owner == user.id

    def _check_edit(self, principal: Any, workspace_id: int | None) -> None:
        """Refuse a caller who may not manage these webhooks: 403 with RBAC; 400 with basic
        authorization, where upstream's open-source master answered a plain (non-403) error, which
        its clients and e2e tests expect (``APIException``, not ``ForbiddenException``)."""
        if not self.can_edit(principal, workspace_id):
            user = getattr(principal, "user", principal)
            what = (
                "global webhooks"
                if workspace_id is None
                else f"workspace {workspace_id}'s webhooks"
            )
            raise APIError(
                403 if self._authz.enabled else 400,
                f"permission denied: user {user.username!r} may not manage {what}"
                + ("" if self._authz.enabled else " (only admins and the workspace's owner may)"),
            )

    def list_for(self, principal: Any) -> list[dict[str, Any]]:
        """The webhooks the caller may see: global ones and those of workspaces it manages."""
        user = getattr(principal, "user", principal)
        everything = user.admin or (
            self._authz.enabled and self._authz.can(principal, Permission.VIEW_WEBHOOKS)
        )
        out = []
        allowed: dict[int, bool] = {}
        for hook in self._registry.snapshot.hooks.values():
            ws = hook.workspace_id
            if not everything and ws is not None:
                if ws not in allowed:
                    allowed[ws] = self.can_edit(principal, ws)
                if not allowed[ws]:
                    continue
            out.append(hook.to_json())
        return out

    def _get(self, webhook_id: int) -> Hook:
        hook = self._registry.snapshot.hooks.get(webhook_id)
        if hook is None:
            self.reload()  # another process (or a workspace's deletion) may have changed the table
            hook = self._registry.snapshot.hooks.get(webhook_id)
        if hook is None:
            raise APIError(404, f"webhook {webhook_id} not found")
        return hook

    def create(self, principal: Any, body: dict[str, Any]) -> dict[str, Any]:
        """Validate and store a ``v1Webhook``; 400 naming the field that is wrong."""
        new = parse_webhook(body)
        workspace_id = new.workspace_id
        if workspace_id is not None:
            with self._db.read() as session:
                if session.get(Workspace, workspace_id) is None:
                    raise APIError(404, f"workspaceId: workspace {workspace_id} not found")
        self._check_edit(principal, workspace_id)
        with self._db.write() as session:
            row = Webhook(
                name=new.name,
                url=new.url,
                webhook_type=new.webhook_type,
                mode=new.mode,
                workspace_id=workspace_id,
            )
            session.add(row)
            session.flush()
            for trigger_type, condition in new.triggers:
                session.add(
                    WebhookTrigger(
                        webhook_id=row.id, trigger_type=trigger_type, condition=condition
                    )
                )
            webhook_id = row.id
        self.reload()
        return self._get(webhook_id).to_json()

    def delete(self, principal: Any, webhook_id: int) -> None:
        """Delete a webhook and its triggers."""
        hook = self._get(webhook_id)
        self._check_edit(principal, hook.workspace_id)
        with self._db.write() as session:
            session.execute(delete(WebhookTrigger).where(WebhookTrigger.webhook_id == webhook_id))
            session.execute(delete(Webhook).where(Webhook.id == webhook_id))
        self.reload()

    def patch(self, principal: Any, webhook_id: int, body: dict[str, Any]) -> None:
        """Change a webhook's URL (the only field upstream's ``PatchWebhook`` has)."""
        hook = self._get(webhook_id)
        self._check_edit(principal, hook.workspace_id)
        inner = get(body, "webhook")
        url = check_url(get(inner if isinstance(inner, dict) else body, "url"))
        with self._db.write() as session:
            row = session.get(Webhook, webhook_id)
            if row is None:
                raise APIError(404, f"webhook {webhook_id} not found")
            row.url = url
        self.reload()

    def test(self, principal: Any, webhook_id: int) -> None:
        """Post a test event to a webhook now; 400 saying why when the receiver fails."""
        hook = self._get(webhook_id)
        self._check_edit(principal, hook.workspace_id)
        try:
            self.shipper.post(hook.url, dumps(ping_event(hook.webhook_type)))
        except DeliveryError as e:
            raise APIError(400, f"webhook {webhook_id}: {e}") from None
