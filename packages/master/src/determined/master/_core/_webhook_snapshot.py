"""The in-memory copy of the webhooks and their triggers, and which events reach which webhook.

The event paths read webhooks from a :class:`Snapshot` (replaced, never changed, after every
change to the tables), so an edited URL holds for the next event and no event path queries the
webhook tables. :func:`matches` is upstream's rule for whether an event's scope reaches a webhook.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import threading
from typing import Any

from sqlalchemy import select

from determined.master.db import Database
from determined.master.db._webhook_models import Webhook, WebhookTrigger

logger = logging.getLogger("determined.master")

STATE_CHANGE = "EXPERIMENT_STATE_CHANGE"
METRIC_THRESHOLD = "METRIC_THRESHOLD_EXCEEDED"
TASK_LOG = "TASK_LOG"
CUSTOM = "CUSTOM"
TRIGGER_TYPES = (STATE_CHANGE, METRIC_THRESHOLD, TASK_LOG, CUSTOM)
WEBHOOK_TYPES = ("DEFAULT", "SLACK")
MODES = ("WORKSPACE", "SPECIFIC")


@dataclasses.dataclass(frozen=True)
class Trigger:
    """One trigger of a webhook: its type and condition."""

    id: int
    trigger_type: str
    condition: dict[str, Any]


@dataclasses.dataclass(frozen=True)
class Hook:
    """One webhook with its triggers."""

    id: int
    name: str
    url: str
    webhook_type: str
    mode: str
    workspace_id: int | None
    triggers: tuple[Trigger, ...]

    def to_json(self) -> dict[str, Any]:
        """Upstream's ``v1Webhook``."""
        return {
            "id": self.id,
            "name": self.name,
            "url": self.url,
            "webhookType": f"WEBHOOK_TYPE_{self.webhook_type}",
            "mode": f"WEBHOOK_MODE_{self.mode}",
            "workspaceId": self.workspace_id or 0,
            "triggers": [
                {
                    "id": t.id,
                    "triggerType": f"TRIGGER_TYPE_{t.trigger_type}",
                    "condition": t.condition,
                    "webhookId": self.id,
                }
                for t in self.triggers
            ],
        }


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """Every webhook, and what the event paths look up before doing any work."""

    hooks: dict[int, Hook]
    states: frozenset[str]
    """States some EXPERIMENT_STATE_CHANGE trigger waits for."""
    patterns: tuple[tuple[str, re.Pattern[str], tuple[tuple[int, int], ...]], ...]
    """(regex, compiled, ((webhook id, trigger id), ...)) of the TASK_LOG triggers."""


@dataclasses.dataclass(frozen=True)
class Scope:
    """Where an event comes from: its experiment (if any), that experiment's webhook settings
    and the workspace."""

    experiment_id: int | None
    config: dict[str, Any] | None
    workspace_id: int | None


def webhook_settings(config: Any) -> dict[str, Any] | None:
    """An experiment config's ``integrations.webhooks`` section (None when absent)."""
    integrations = config.get("integrations") if isinstance(config, dict) else None
    hooks = integrations.get("webhooks") if isinstance(integrations, dict) else None
    return hooks if isinstance(hooks, dict) else None


def _named(hook: Hook, settings: dict[str, Any]) -> bool:
    ids = settings.get("webhook_id") or []
    names = settings.get("webhook_name") or []
    return hook.id in ids or (bool(hook.name) and hook.name in names)


def matches(hook: Hook, scope: Scope) -> bool:
    """Whether an event from ``scope`` reaches ``hook`` (upstream's ``matchWebhook``)."""
    settings = scope.config
    if settings is not None and settings.get("exclude"):
        return False
    if hook.workspace_id is not None and hook.workspace_id != scope.workspace_id:
        return False
    if hook.mode == "SPECIFIC":
        return scope.experiment_id is not None and settings is not None and _named(hook, settings)
    return True


def build_snapshot(rows: list[Webhook], triggers: list[WebhookTrigger]) -> Snapshot:
    """The snapshot of these webhook and trigger rows (invalid regexes are left out)."""
    by_hook: dict[int, list[Trigger]] = {}
    for t in triggers:
        by_hook.setdefault(t.webhook_id, []).append(
            Trigger(t.id, t.trigger_type, dict(t.condition or {}))
        )
    hooks = {
        r.id: Hook(
            r.id,
            r.name,
            r.url,
            r.webhook_type,
            r.mode,
            r.workspace_id,
            tuple(by_hook.get(r.id, ())),
        )
        for r in rows
    }
    states: set[str] = set()
    patterns: dict[str, list[tuple[int, int]]] = {}
    for hook in hooks.values():
        for trigger in hook.triggers:
            kind, condition = trigger.trigger_type, trigger.condition
            if kind == STATE_CHANGE and isinstance(condition.get("state"), str):
                states.add(condition["state"])
            elif kind == TASK_LOG and isinstance(condition.get("regex"), str):
                patterns.setdefault(condition["regex"], []).append((hook.id, trigger.id))
    compiled = []
    for regex, pairs in patterns.items():
        try:
            compiled.append((regex, re.compile(regex), tuple(pairs)))
        except re.error:
            logger.warning("webhooks: ignoring the invalid regex %r", regex)
    return Snapshot(hooks, frozenset(states), tuple(compiled))


class WebhookRegistry:
    """Holds the current :class:`Snapshot` and rereads it from the database on demand."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._lock = threading.Lock()
        self.snapshot = Snapshot({}, frozenset(), ())
        """The webhooks as of the last :meth:`reload` (replaced whole, never mutated)."""

    def reload(self) -> None:
        """Read every webhook into a new snapshot."""
        with self._lock, self._db.read() as session:
            rows = list(session.scalars(select(Webhook).order_by(Webhook.id)))
            triggers = list(session.scalars(select(WebhookTrigger).order_by(WebhookTrigger.id)))
        self.snapshot = build_snapshot(rows, triggers)
