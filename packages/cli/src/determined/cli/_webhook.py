"""``det webhook``: the master's webhooks (docs/webhooks.md) — list, create, point at another URL,
send a test event, delete. Upstream's CLI has no such command; its SDK bindings and web UI do this.
"""

from __future__ import annotations

import argparse
from typing import Any

from determined.cli import _render, _session
from determined.cli._declarative import Arg, Cmd
from determined.cli._errors import CliError


def _trigger_text(trigger: dict[str, Any]) -> str:
    kind = str(trigger.get("triggerType", "")).removeprefix("TRIGGER_TYPE_")
    condition = trigger.get("condition") or {}
    detail = ", ".join(f"{k}={v}" for k, v in sorted(condition.items()))
    return f"{kind}({detail})" if detail else kind


def list_webhooks(args: argparse.Namespace) -> None:
    hooks = _session.api(args).webhooks.list().get("webhooks") or []
    if args.json:
        _render.print_json(hooks)
        return
    rows = [
        [
            h["id"],
            h.get("name") or "",
            h["url"],
            str(h.get("webhookType", "")).removeprefix("WEBHOOK_TYPE_"),
            str(h.get("mode", "")).removeprefix("WEBHOOK_MODE_"),
            h.get("workspaceId") or "global",
            "; ".join(_trigger_text(t) for t in h.get("triggers") or []),
        ]
        for h in hooks
    ]
    _render.print_table(["ID", "Name", "URL", "Type", "Mode", "Workspace", "Triggers"], rows)


def create_webhook(args: argparse.Namespace) -> None:
    triggers: list[dict[str, Any]] = [
        {"triggerType": "TRIGGER_TYPE_EXPERIMENT_STATE_CHANGE", "condition": {"state": s.upper()}}
        for s in args.state or []
    ]
    triggers += [
        {"triggerType": "TRIGGER_TYPE_TASK_LOG", "condition": {"regex": r}}
        for r in args.log_regex or []
    ]
    if args.custom:
        triggers.append({"triggerType": "TRIGGER_TYPE_CUSTOM", "condition": {}})
    if not triggers:
        raise CliError("give at least one trigger: --state, --log-regex or --custom")
    body = {
        "url": args.url,
        "webhookType": f"WEBHOOK_TYPE_{args.type.upper()}",
        "mode": f"WEBHOOK_MODE_{args.mode.upper()}",
        "name": args.name or "",
        "workspaceId": args.workspace_id or 0,
        "triggers": triggers,
    }
    hook = _session.api(args).webhooks.create(body)["webhook"]
    print(_render.colored(f"Created webhook {hook['id']}", "green"))


def edit_webhook(args: argparse.Namespace) -> None:
    _session.api(args).webhooks.set_url(args.webhook_id, args.url)
    print(_render.colored(f"Webhook {args.webhook_id} now posts to {args.url}", "green"))


def test_webhook(args: argparse.Namespace) -> None:
    _session.api(args).webhooks.test(args.webhook_id)
    print(_render.colored(f"Webhook {args.webhook_id}: the test event was delivered", "green"))


def delete_webhook(args: argparse.Namespace) -> None:
    _session.api(args).webhooks.delete(args.webhook_id)
    print(_render.colored(f"Deleted webhook {args.webhook_id}", "green"))


_ID = Arg("webhook_id", type=int, help="webhook id")

COMMANDS = [
    Cmd(
        "webhook webhooks",
        None,
        "manage webhooks",
        [
            Cmd(
                "list ls",
                list_webhooks,
                "list webhooks",
                [Arg("--json", action="store_true", help="print as JSON")],
                default=True,
            ),
            Cmd(
                "create",
                create_webhook,
                "create a webhook",
                [
                    Arg("url", help="where events are posted"),
                    Arg("--type", choices=["default", "slack"], default="default"),
                    Arg("--mode", choices=["workspace", "specific"], default="workspace"),
                    Arg("--name", help="name experiments use in integrations.webhooks"),
                    Arg("--workspace-id", type=int, help="the workspace (default: global)"),
                    Arg(
                        "--state",
                        action="append",
                        help="fire when an experiment enters this state (repeatable)",
                    ),
                    Arg(
                        "--log-regex",
                        action="append",
                        help="fire on a task's first log line matching this (repeatable)",
                    ),
                    Arg(
                        "--custom",
                        action="store_true",
                        help="fire on core_context.alert() (mode specific only)",
                    ),
                ],
            ),
            Cmd(
                "edit",
                edit_webhook,
                "point a webhook at another URL",
                [_ID, Arg("--url", required=True, help="the new URL")],
            ),
            Cmd("test", test_webhook, "send a test event now", [_ID]),
            Cmd("delete rm", delete_webhook, "delete a webhook", [_ID]),
        ],
    )
]
