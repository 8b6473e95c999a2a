"""Checking a webhook's REST body: each wrong field is a 400 naming it (upstream's field names)."""

from __future__ import annotations

import dataclasses
import re
import urllib.parse
from typing import Any

from determined.master._core._webhook_snapshot import (
    CUSTOM,
    MODES,
    STATE_CHANGE,
    TASK_LOG,
    TRIGGER_TYPES,
    WEBHOOK_TYPES,
)
from determined.master._wire import EXPERIMENT_STATES, APIError, get


@dataclasses.dataclass(frozen=True)
class NewWebhook:
    """A checked ``v1Webhook`` to create (``workspace_id`` None: a global one)."""

    name: str
    url: str
    webhook_type: str
    mode: str
    workspace_id: int | None
    triggers: list[tuple[str, dict[str, Any]]]


def _enum(value: Any, prefix: str, allowed: tuple[str, ...], field: str) -> str:
    name = str(value or "").upper().removeprefix(prefix)
    if name not in allowed:
        names = ", ".join(prefix + a for a in allowed)
        raise APIError(400, f"{field}: must be one of {names}, got {value!r}")
    return name


def check_url(value: Any, field: str = "url") -> str:
    """``value`` stripped, when it is an http(s) URL; else a 400."""
    if not isinstance(value, str) or not value.strip():
        raise APIError(400, f"{field}: a valid http(s) URL is required")
    parts = urllib.parse.urlsplit(value.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise APIError(400, f"{field}: a valid http(s) URL is required, got {value!r}")
    return value.strip()


def parse_webhook(body: dict[str, Any]) -> NewWebhook:
    """Check a ``v1Webhook`` body (the workspace's existence is the caller's to check)."""
    url = check_url(get(body, "url"))
    webhook_type = _enum(get(body, "webhook_type"), "WEBHOOK_TYPE_", WEBHOOK_TYPES, "webhookType")
    mode_raw = get(body, "mode")
    mode = "WORKSPACE"
    if mode_raw not in (None, "", "WEBHOOK_MODE_UNSPECIFIED"):
        mode = _enum(mode_raw, "WEBHOOK_MODE_", MODES, "mode")
    name = get(body, "name") or ""
    if not isinstance(name, str) or len(name) > 255:
        raise APIError(400, "name: must be a string of at most 255 characters")
    workspace_id = get(body, "workspace_id")
    if workspace_id in (None, 0, "0", ""):
        workspace_id = None
    else:
        try:
            workspace_id = int(workspace_id)
        except (TypeError, ValueError):
            raise APIError(400, f"workspaceId: must be an integer, got {workspace_id!r}") from None
    triggers = parse_triggers(get(body, "triggers"), mode)
    return NewWebhook(name, url, webhook_type, mode, workspace_id, triggers)


def parse_triggers(value: Any, mode: str) -> list[tuple[str, dict[str, Any]]]:
    """Check a webhook's ``triggers``: ``(trigger type, condition)`` of each."""
    if not isinstance(value, list) or not value:
        raise APIError(400, "triggers: at least one trigger is required")
    out = []
    for i, raw in enumerate(value):
        field = f"triggers[{i}]"
        if not isinstance(raw, dict):
            raise APIError(400, f"{field}: must be an object")
        kind = _enum(
            get(raw, "trigger_type"), "TRIGGER_TYPE_", TRIGGER_TYPES, f"{field}.triggerType"
        )
        condition = raw.get("condition")
        if condition is None:
            condition = {}
        if not isinstance(condition, dict):
            raise APIError(400, f"{field}.condition: must be an object")
        _check_condition(kind, condition, mode, field)
        out.append((kind, condition))
    return out


def _check_condition(kind: str, condition: dict[str, Any], mode: str, field: str) -> None:
    if kind == TASK_LOG:
        regex = condition.get("regex")
        if set(condition) != {"regex"} or not isinstance(regex, str):
            raise APIError(
                400, f"{field}.condition: a TASK_LOG trigger needs exactly {{'regex': str}}"
            )
        try:
            re.compile(regex)
        except re.error as e:
            raise APIError(400, f"{field}.condition.regex: invalid pattern: {e}") from None
    elif kind == STATE_CHANGE:
        state = condition.get("state")
        if state not in EXPERIMENT_STATES:
            raise APIError(
                400,
                f"{field}.condition.state: must be an experiment state"
                f" ({', '.join(EXPERIMENT_STATES)}), got {state!r}",
            )
    elif kind == CUSTOM and mode != "SPECIFIC":
        raise APIError(400, f"{field}: a CUSTOM trigger only works on a webhook with mode SPECIFIC")
