"""Planning webhook events: which webhooks an experiment state change, a matched log line or a
custom alert reaches, and the ``(url, payload)`` each one posts.

Functions of a database session and a :class:`Snapshot`; they write nothing but the
once-per-task marks of TASK_LOG triggers (``webhook_task_log_triggers``).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from determined.master._core._webhook_payloads import (
    ExperimentFacts,
    experiment_event,
    task_log_event,
)
from determined.master._core._webhook_snapshot import (
    CUSTOM,
    STATE_CHANGE,
    Scope,
    Snapshot,
    matches,
    webhook_settings,
)
from determined.master.db import Experiment, Project, Run, Task, Workspace
from determined.master.db._task_models import NtscTask
from determined.master.db._webhook_models import WebhookTaskLogTrigger

Events = list[tuple[str, dict[str, Any]]]
"""``(url, payload)`` of each event to post."""


def experiment_scope(
    session: Session, exp_id: int, state: str | None = None
) -> tuple[ExperimentFacts, Scope] | None:
    """What an event says about an experiment (``state``: its new one) and its scope."""
    exp = session.get(Experiment, exp_id)
    if exp is None:
        return None
    project = session.get(Project, exp.project_id)
    workspace = session.get(Workspace, project.workspace_id) if project else None
    config = exp.config if isinstance(exp.config, dict) else {}
    resources = config.get("resources")
    resources = resources if isinstance(resources, dict) else {}
    facts = ExperimentFacts(
        id=exp.id,
        state=state or exp.state,
        name=str(config.get("name") or f"Experiment (#{exp.id})"),
        start_time=exp.start_time,
        end_time=exp.end_time,
        resource_pool=str(resources.get("resource_pool") or "default"),
        slots_per_trial=int(resources.get("slots_per_trial") or 1),
        workspace=workspace.name if workspace else "",
        project=project.name if project else "",
        workspace_id=workspace.id if workspace else 0,
        project_id=project.id if project else 0,
    )
    scope = Scope(exp.id, webhook_settings(config), workspace.id if workspace else None)
    return facts, scope


def state_events(
    session: Session, snapshot: Snapshot, exp_id: int, state: str, base_url: str
) -> Events:
    """The events of an experiment entering ``state``."""
    found = experiment_scope(session, exp_id, state)
    if found is None:
        return []
    facts, scope = found
    out = []
    for hook in snapshot.hooks.values():
        for t in hook.triggers:
            fires = t.trigger_type == STATE_CHANGE and t.condition.get("state") == state
            if fires and matches(hook, scope):
                payload = experiment_event(hook.webhook_type, STATE_CHANGE, facts, base_url)
                out.append((hook.url, payload))
    return out


def _task_scope(session: Session, task_id: str) -> tuple[Scope, tuple[int, int] | None, str]:
    """A task's scope, its ``(experiment id, trial id)`` when a trial's, and its kind."""
    task = session.get(Task, task_id)
    if task is not None and task.trial_id is not None:
        run = session.get(Run, task.trial_id)
        found = experiment_scope(session, run.experiment_id) if run is not None else None
        if run is not None and found is not None:
            return found[1], (run.experiment_id, run.id), "TRIAL"
    ntsc = session.get(NtscTask, task_id)
    if ntsc is not None:
        return Scope(None, None, ntsc.workspace_id), None, ntsc.kind.upper()
    kind = task.task_type if task is not None else "UNKNOWN"
    return Scope(None, None, None), None, kind


def log_events(
    session: Session, snapshot: Snapshot, task_id: str, hits: list[Any], base_url: str
) -> Events:
    """The events of a task's log lines that matched TASK_LOG triggers; ``hits`` holds
    ``(regex, ((webhook id, trigger id), ...), line, node)``. Each trigger fires once per task."""
    scope, trial, kind = _task_scope(session, task_id)
    hooks = snapshot.hooks
    out = []
    for regex, pairs, line, node in hits:
        for hook_id, trigger_id in pairs:
            hook = hooks.get(hook_id)
            if hook is None or not matches(hook, scope):
                continue
            if session.get(WebhookTaskLogTrigger, (task_id, trigger_id)) is not None:
                continue  # each trigger fires once per task
            session.add(WebhookTaskLogTrigger(task_id=task_id, trigger_id=trigger_id))
            session.flush()
            payload = task_log_event(
                hook.webhook_type, regex, task_id, node, line, trial, kind, base_url
            )
            out.append((hook.url, payload))
    return out


def custom_events(
    session: Session,
    snapshot: Snapshot,
    exp_id: int,
    trial_id: int | None,
    custom: dict[str, str],
    base_url: str,
) -> Events:
    """The events of ``core.alert()``: the CUSTOM triggers of the webhooks the experiment names."""
    found = experiment_scope(session, exp_id)
    if found is None:
        return []
    facts, scope = found
    settings = scope.config
    if settings is None or settings.get("exclude"):
        return []
    hooks = snapshot.hooks
    chosen = {i: hooks[i] for i in settings.get("webhook_id") or [] if i in hooks}
    names = settings.get("webhook_name") or []
    chosen.update({h.id: h for h in hooks.values() if h.name and h.name in names})
    out = []
    for hook in chosen.values():
        if hook.workspace_id is not None and hook.workspace_id != scope.workspace_id:
            continue
        for t in hook.triggers:
            if t.trigger_type == CUSTOM:
                payload = experiment_event(
                    hook.webhook_type, CUSTOM, facts, base_url, custom, trial_id
                )
                out.append((hook.url, payload))
    return out
