"""The bodies webhooks post: Determined's JSON events (``DEFAULT``) and Slack messages (``SLACK``).

Pure functions of plain values, so the shapes are testable without a master. The JSON field names,
the Slack wording and colours follow upstream 0.38.1, whose receivers (and e2e tests) read them.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import hmac
import json
import time
import uuid
from typing import Any

COMPLETED_COLOR = "#13B670"
ERROR_COLOR = "#DD5040"
OTHER_COLOR = "#009bde"


@dataclasses.dataclass(frozen=True)
class ExperimentFacts:
    """What an event says about an experiment."""

    id: int
    state: str
    name: str
    start_time: datetime.datetime
    end_time: datetime.datetime | None
    resource_pool: str
    slots_per_trial: int
    workspace: str
    project: str
    workspace_id: int = 0
    project_id: int = 0

    def duration_s(self) -> int:
        """Whole seconds from start to end (0 while running, as upstream)."""
        if self.end_time is None:
            return 0
        return int((_aware(self.end_time) - _aware(self.start_time)).total_seconds())


def _aware(value: datetime.datetime) -> datetime.datetime:
    return value if value.tzinfo else value.replace(tzinfo=datetime.timezone.utc)


def _event(event_type: str, condition: dict[str, Any], data: dict[str, Any]) -> dict[str, Any]:
    return {
        "event_id": str(uuid.uuid4()),
        "event_type": event_type,
        "timestamp": int(time.time()),
        "condition": {k: v for k, v in condition.items() if v},
        "event_data": data,
    }


def _experiment_json(exp: ExperimentFacts, trial_id: int | None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": exp.id,
        "state": exp.state,
        "name": exp.name,
        "duration": exp.duration_s(),
        "resource_pool": exp.resource_pool,
        "slots_per_trial": exp.slots_per_trial,
        "workspace": exp.workspace,
        "project": exp.project,
    }
    if trial_id:
        out["trial_id"] = trial_id
    return out


def experiment_event(
    webhook_type: str,
    event_type: str,
    exp: ExperimentFacts,
    base_url: str = "",
    custom: dict[str, str] | None = None,
    trial_id: int | None = None,
) -> dict[str, Any]:
    """An experiment's state change (``EXPERIMENT_STATE_CHANGE``) or a custom alert (``CUSTOM``,
    with ``custom`` = ``{title, description, level}``)."""
    if webhook_type == "SLACK":
        return _slack_experiment(exp, base_url, custom, trial_id)
    data: dict[str, Any] = {"experiment": _experiment_json(exp, trial_id)}
    if custom is not None:
        data["custom_data"] = custom
    return _event(event_type, {"state": exp.state}, data)


def _duration_text(exp: ExperimentFacts) -> str:
    end = _aware(exp.end_time) if exp.end_time else datetime.datetime.now(datetime.timezone.utc)
    minutes = max(0, int((end - _aware(exp.start_time)).total_seconds() // 60))
    return f"{minutes // 60}h {minutes % 60}min"


def _slack_experiment(
    exp: ExperimentFacts, base_url: str, custom: dict[str, str] | None, trial_id: int | None
) -> dict[str, Any]:
    label = f"{exp.name} (#{exp.id})"
    if base_url:
        label = f"<{base_url}/det/experiments/{exp.id}/overview | {label}>"
    if exp.state == "COMPLETED":
        status, label, color, short = (
            "Your experiment completed successfully 🎉",
            f"✅ {label}",
            COMPLETED_COLOR,
            "Completed",
        )
    elif exp.state == "ERROR":
        status, label, color, short = (
            "Your experiment has stopped with errors",
            f"❌ {label}",
            ERROR_COLOR,
            "Errored",
        )
    else:
        status, color, short = (
            f"The status of your experiment is {exp.state}",
            OTHER_COLOR,
            exp.state,
        )
    fields = [
        _mrkdwn(f"*Status*: {short}"),
        _mrkdwn(f"*Duration*: {_duration_text(exp)}"),
    ]
    if exp.workspace:
        ws = exp.workspace
        if base_url and exp.workspace_id:
            ws = f"<{base_url}/det/workspaces/{exp.workspace_id}/projects | {ws}>"
        fields.append(_mrkdwn(f"*Workspace*: {ws}"))
    if exp.project:
        pj = exp.project
        if base_url and exp.project_id:
            pj = f"<{base_url}/det/projects/{exp.project_id} | {pj}>"
        fields.append(_mrkdwn(f"*Project*: {pj}"))
    if trial_id:
        fields.append(_mrkdwn(f"*Trial ID*: {trial_id}"))
    message: dict[str, Any] = {"type": "section", "text": {"type": "plain_text", "text": status}}
    if custom is not None:
        message["fields"] = [
            _mrkdwn(f"*Level*: {custom.get('level', '')}"),
            _mrkdwn(f"*Title*: {custom.get('title', '')}"),
            _mrkdwn(f"*Description*: {custom.get('description', '')}"),
        ]
    return {
        "blocks": [message],
        "attachments": [
            {
                "color": color,
                "blocks": [{"type": "section", "text": _mrkdwn(label), "fields": fields}],
            }
        ],
    }


def _mrkdwn(text: str) -> dict[str, str]:
    return {"type": "mrkdwn", "text": text}


def task_log_event(
    webhook_type: str,
    regex: str,
    task_id: str,
    node: str,
    line: str,
    trial: tuple[int, int] | None,
    task_type: str = "TRIAL",
    base_url: str = "",
) -> dict[str, Any]:
    """A log line of a task matched a ``TASK_LOG`` trigger's regex (``trial``: (experiment id,
    trial id) for a trial's task)."""
    if webhook_type != "SLACK":
        data = {"task_log": {"task_id": task_id, "node_name": node, "triggering_log": line}}
        return _event("TASK_LOG", {"regex": regex}, data)
    if trial is not None:
        exp_id, trial_id = trial
        text = (
            f"Experiment ID `{exp_id}`, Trial ID `{trial_id}`, running on node `{node}`,"
            f" reported a log\n```{line}```\nThis log matched the regex\n```{regex}```\n"
        )
        path = f"/det/experiments/{exp_id}/trials/{trial_id}/logs"
        text += (
            f"<{base_url}{path} | View full logs here>" if base_url else f"View full logs at {path}"
        )
    else:
        text = (
            f"Task ID `{task_id}`, task type `{task_type}`, running on node `{node}`, reported a"
            f" log\n```{line}```\nThis log matched the regex\n```{regex}```\n"
        )
    return {"blocks": [{"type": "section", "text": _mrkdwn(text)}]}


def ping_event(webhook_type: str) -> dict[str, Any]:
    """The body ``POST /api/v1/webhooks/{id}/test`` sends."""
    if webhook_type == "SLACK":
        return {"blocks": [{"type": "section", "text": {"type": "plain_text", "text": "test"}}]}
    return _event("EXPERIMENT_STATE_CHANGE", {"state": "COMPLETED"}, {"data": "test"})


def signed_headers(body: bytes, key: bytes, now: int | None = None) -> dict[str, str]:
    """Upstream's signature headers: HMAC-SHA256 of ``"<timestamp>,<body>"`` under the master's
    signing key, hex-encoded, with the timestamp beside it."""
    stamp = int(time.time()) if now is None else now
    mac = hmac.new(key, f"{stamp},".encode() + body, hashlib.sha256).hexdigest()
    return {
        "X-Determined-AI-Signature-Timestamp": str(stamp),
        "X-Determined-AI-Signature": mac,
        "Content-Type": "application/json; charset=UTF-8",
    }


def dumps(payload: dict[str, Any]) -> str:
    """Compact JSON with non-ASCII kept (Slack's emoji), as Go's encoder writes it."""
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
