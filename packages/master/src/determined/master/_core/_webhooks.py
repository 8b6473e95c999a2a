"""The webhooks service: webhooks and their triggers, and the events they send.

A webhook is a URL, a type (``DEFAULT``: Determined's JSON event; ``SLACK``: a Slack message), a
scope (global, or one workspace) and a mode (``WORKSPACE``: every experiment in scope;
``SPECIFIC``: only experiments whose config names it under ``integrations.webhooks``). Its
triggers say when it fires:

    EXPERIMENT_STATE_CHANGE    {"state": "COMPLETED"}: an experiment entered that state
    TASK_LOG                   {"regex": "..."}: a task's log line matched (once per task)
    CUSTOM                     ``core.alert()`` of a trial whose experiment names the webhook
    METRIC_THRESHOLD_EXCEEDED  accepted and stored; never fires (as upstream)

What fires is noticed where it happens: an experiment's state change by an attribute listener on
``Experiment.state`` (its events are queued in the same transaction, which holds the experiment
row already), log lines (``task_logs`` rows a flush writes) by matching the triggers' regexes once
the transaction that stores them commits, and alerts by their route. Log and alert events are
planned (scopes matched, payloads built, the queue written) on the service's own thread; every
post happens on :class:`WebhookShipper`'s pool, so no request and no trial report waits for one.
The webhooks themselves are cached in memory (a snapshot replaced after every change), so an
edited URL holds for the next event.

Who may manage webhooks follows upstream's basic rules: admins manage global webhooks and every
workspace's; a workspace's owner manages its webhooks. With RBAC, ``EDIT_WEBHOOKS`` held
cluster-wide manages all, ``UPDATE_WORKSPACE`` on a workspace (WorkspaceAdmin) manages its own.
"""

from __future__ import annotations

import dataclasses
import logging
import queue
import re
import secrets
import threading
import urllib.parse
from typing import Any

from sqlalchemy import delete, event, select
from sqlalchemy.orm import Session, object_session

from determined.master._core._authz import Authz, Permission
from determined.master._core._webhook_delivery import DeliveryError, WebhookShipper
from determined.master._core._webhook_payloads import (
    ExperimentFacts,
    dumps,
    experiment_event,
    ping_event,
    task_log_event,
)
from determined.master._wire import APIError, get
from determined.master.db import Database, Experiment, Project, Run, Task, TaskLog, Workspace
from determined.master.db._task_models import NtscTask
from determined.master.db._webhook_models import (
    Webhook,
    WebhookEvent,
    WebhookTaskLogTrigger,
    WebhookTrigger,
)

logger = logging.getLogger("determined.master")

STATE_CHANGE = "EXPERIMENT_STATE_CHANGE"
METRIC_THRESHOLD = "METRIC_THRESHOLD_EXCEEDED"
TASK_LOG = "TASK_LOG"
CUSTOM = "CUSTOM"
TRIGGER_TYPES = (STATE_CHANGE, METRIC_THRESHOLD, TASK_LOG, CUSTOM)
WEBHOOK_TYPES = ("DEFAULT", "SLACK")
MODES = ("WORKSPACE", "SPECIFIC")
EXPERIMENT_STATES = (
    "ACTIVE",
    "PAUSED",
    "STOPPING_COMPLETED",
    "STOPPING_CANCELED",
    "STOPPING_KILLED",
    "STOPPING_ERROR",
    "COMPLETED",
    "CANCELED",
    "ERROR",
    "DELETING",
    "DELETE_FAILED",
    "DELETED",
)

_CONFIG_LINE = re.compile(r'"log_policies":')
"""A line printing an experiment config holds the patterns themselves; it never matches (upstream)."""

_STATES_KEY = "det_webhook_states"
_LOGS_KEY = "det_webhook_log_lines"
_ROWS_KEY = "det_webhook_event_rows"
_RELOAD_KEY = "det_webhook_reload"


@dataclasses.dataclass(frozen=True)
class _Trigger:
    id: int
    trigger_type: str
    condition: dict[str, Any]


@dataclasses.dataclass(frozen=True)
class _Hook:
    id: int
    name: str
    url: str
    webhook_type: str
    mode: str
    workspace_id: int | None
    triggers: tuple[_Trigger, ...]

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
class _Snapshot:
    hooks: dict[int, _Hook]
    states: frozenset[str]
    """States some EXPERIMENT_STATE_CHANGE trigger waits for."""
    patterns: tuple[tuple[str, re.Pattern[str], tuple[tuple[int, int], ...]], ...]
    """(regex, compiled, ((webhook id, trigger id), ...)) of the TASK_LOG triggers."""


@dataclasses.dataclass(frozen=True)
class _Scope:
    """Where an event comes from: its experiment (if any), that experiment's webhook settings
    and the workspace."""

    experiment_id: int | None
    config: dict[str, Any] | None
    workspace_id: int | None


@event.listens_for(Experiment.state, "set")
def _state_set(target: Experiment, value: Any, oldvalue: Any, _initiator: Any) -> None:
    if value == oldvalue or target.id is None:
        return
    session = object_session(target)
    if session is not None:
        session.info.setdefault(_STATES_KEY, []).append((target.id, value))


def _enum(value: Any, prefix: str, allowed: tuple[str, ...], field: str) -> str:
    name = str(value or "").upper().removeprefix(prefix)
    if name not in allowed:
        names = ", ".join(prefix + a for a in allowed)
        raise APIError(400, f"{field}: must be one of {names}, got {value!r}")
    return name


def _check_url(value: Any, field: str = "url") -> str:
    if not isinstance(value, str) or not value.strip():
        raise APIError(400, f"{field}: a valid http(s) URL is required")
    parts = urllib.parse.urlsplit(value.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise APIError(400, f"{field}: a valid http(s) URL is required, got {value!r}")
    return value.strip()


def _webhook_settings(config: Any) -> dict[str, Any] | None:
    integrations = config.get("integrations") if isinstance(config, dict) else None
    hooks = integrations.get("webhooks") if isinstance(integrations, dict) else None
    return hooks if isinstance(hooks, dict) else None


def _named(hook: _Hook, settings: dict[str, Any]) -> bool:
    ids = settings.get("webhook_id") or []
    names = settings.get("webhook_name") or []
    return hook.id in ids or (bool(hook.name) and hook.name in names)


def matches(hook: _Hook, scope: _Scope) -> bool:
    """Whether an event from ``scope`` reaches ``hook`` (upstream's ``matchWebhook``)."""
    settings = scope.config
    if settings is not None and settings.get("exclude"):
        return False
    if hook.workspace_id is not None and hook.workspace_id != scope.workspace_id:
        return False
    if hook.mode == "SPECIFIC":
        return scope.experiment_id is not None and settings is not None and _named(hook, settings)
    return True


def _log_level(value: Any) -> str:
    return str(value or "").upper().removeprefix("LOG_LEVEL_").replace("UNSPECIFIED", "")


class Webhooks:
    """Webhooks: their management, and the events they send (see the module docstring)."""

    def __init__(
        self, db: Database, authz: Authz, signing_key: str | None = None, base_url: str = ""
    ) -> None:
        self._db = db
        self._authz = authz
        self.base_url = base_url.rstrip("/")
        """The web UI's address for links in Slack messages ('' for none)."""
        key = (signing_key or secrets.token_hex(32)).encode()
        self.shipper = WebhookShipper(db, key)
        self._jobs: queue.SimpleQueue[tuple[Any, ...] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._snapshot = _Snapshot({}, frozenset(), ())
        self._reload_lock = threading.Lock()
        self.reload()
        event.listen(db._sessions, "after_flush", self._after_flush)
        event.listen(db._sessions, "before_commit", self._before_commit)
        event.listen(db._sessions, "after_commit", self._after_commit)
        event.listen(db._sessions, "after_soft_rollback", self._after_rollback)

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
            self.base_url = base_url.rstrip("/")

    # --- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        """Start planning events (and deliver those a previous run left queued)."""
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._plan, name="det-webhooks", daemon=True)
        self._thread.start()
        self.shipper.resend_pending()

    def stop(self) -> None:
        """Stop planning and delivering; undelivered events wait in the queue table."""
        if self._thread is not None:
            self._jobs.put(None)
            self._thread.join(timeout=5)
            self._thread = None
        self.shipper.close()

    def wait_idle(self, timeout: float = 10.0) -> None:
        """Block until the jobs queued so far are planned (tests)."""
        done = threading.Event()
        self._jobs.put(("barrier", done))
        done.wait(timeout)

    def reload(self) -> None:
        """Read every webhook into the in-memory snapshot the event paths use."""
        with self._reload_lock, self._db.read() as session:
            rows = list(session.scalars(select(Webhook).order_by(Webhook.id)))
            triggers = list(session.scalars(select(WebhookTrigger).order_by(WebhookTrigger.id)))
        by_hook: dict[int, list[_Trigger]] = {}
        for t in triggers:
            by_hook.setdefault(t.webhook_id, []).append(
                _Trigger(t.id, t.trigger_type, dict(t.condition or {}))
            )
        hooks = {
            r.id: _Hook(
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
        self._snapshot = _Snapshot(hooks, frozenset(states), tuple(compiled))

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
        for hook in self._snapshot.hooks.values():
            ws = hook.workspace_id
            if not everything and ws is not None:
                if ws not in allowed:
                    allowed[ws] = self.can_edit(principal, ws)
                if not allowed[ws]:
                    continue
            out.append(hook.to_json())
        return out

    def _get(self, webhook_id: int) -> _Hook:
        hook = self._snapshot.hooks.get(webhook_id)
        if hook is None:
            self.reload()  # another process (or a workspace's deletion) may have changed the table
            hook = self._snapshot.hooks.get(webhook_id)
        if hook is None:
            raise APIError(404, f"webhook {webhook_id} not found")
        return hook

    def create(self, principal: Any, body: dict[str, Any]) -> dict[str, Any]:
        """Validate and store a ``v1Webhook``; 400 naming the field that is wrong."""
        url = _check_url(get(body, "url"))
        webhook_type = _enum(
            get(body, "webhook_type"), "WEBHOOK_TYPE_", WEBHOOK_TYPES, "webhookType"
        )
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
                raise APIError(
                    400, f"workspaceId: must be an integer, got {workspace_id!r}"
                ) from None
        triggers = self._parse_triggers(get(body, "triggers"), mode)
        if workspace_id is not None:
            with self._db.read() as session:
                if session.get(Workspace, workspace_id) is None:
                    raise APIError(404, f"workspaceId: workspace {workspace_id} not found")
        self._check_edit(principal, workspace_id)
        with self._db.write() as session:
            row = Webhook(
                name=name, url=url, webhook_type=webhook_type, mode=mode, workspace_id=workspace_id
            )
            session.add(row)
            session.flush()
            for trigger_type, condition in triggers:
                session.add(
                    WebhookTrigger(
                        webhook_id=row.id, trigger_type=trigger_type, condition=condition
                    )
                )
            webhook_id = row.id
        self.reload()
        return self._get(webhook_id).to_json()

    def _parse_triggers(self, value: Any, mode: str) -> list[tuple[str, dict[str, Any]]]:
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
                raise APIError(
                    400, f"{field}: a CUSTOM trigger only works on a webhook with mode SPECIFIC"
                )
            out.append((kind, condition))
        return out

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
        url = _check_url(get(inner if isinstance(inner, dict) else body, "url"))
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

    # --- intake (cheap, on the caller's thread) ------------------------------------------------

    def _after_flush(self, session: Session, _context: Any) -> None:
        """Note the log lines a task shipped or its output the resource manager forwarded (rows
        added through the ORM; the master's own lines are inserted directly and never match),
        and deleted workspaces (their webhooks went with them)."""
        if self._snapshot.hooks and any(isinstance(o, Workspace) for o in session.deleted):
            session.info[_RELOAD_KEY] = True
        if not self._snapshot.patterns:
            return
        lines = [(o.task_id, o.log, o.agent_id) for o in session.new if isinstance(o, TaskLog)]
        if lines:
            session.info.setdefault(_LOGS_KEY, []).extend(lines)

    def _before_commit(self, session: Session) -> None:
        """Queue the events of the experiment state changes this transaction makes, in it: they
        are posted the moment it commits, before a client polling the experiment can see the new
        state (upstream's e2e tests stop their receiver right then)."""
        changes = session.info.pop(_STATES_KEY, None)
        wanted = self._snapshot.states
        if not changes or not wanted:
            return
        try:
            events = []
            for exp_id, state in changes:
                if state in wanted:
                    events += self._state_events(session, exp_id, state)
            rows = [WebhookEvent(url=url, payload=dumps(payload)) for url, payload in events]
        except Exception:  # a webhook never fails the transaction it watches
            logger.exception("webhooks: planning experiment state events failed")
            return
        if rows:
            session.add_all(rows)
            session.info[_ROWS_KEY] = rows

    def _after_commit(self, session: Session) -> None:
        rows = session.info.pop(_ROWS_KEY, None)
        if rows:
            self.shipper.submit(rows)
        lines = session.info.pop(_LOGS_KEY, None)
        if lines:
            self.scan_logs(lines)
        if session.info.pop(_RELOAD_KEY, False):
            self.reload()

    def _after_rollback(self, session: Session, _previous: Any = None) -> None:
        for key in (_STATES_KEY, _LOGS_KEY, _ROWS_KEY, _RELOAD_KEY):
            session.info.pop(key, None)

    def scan_logs(self, lines: list[tuple[str, str, str | None]]) -> None:
        """Match stored log lines ``(task id, text, node)`` against the TASK_LOG triggers; a
        match is planned and sent on the service's thread."""
        patterns = self._snapshot.patterns
        if not patterns:
            return
        hits: dict[str, list[Any]] = {}
        for task_id, text, node in lines:
            if _CONFIG_LINE.search(text):
                continue
            for regex, compiled, pairs in patterns:
                if compiled.search(text):
                    hit = (regex, pairs, text.rstrip("\n"), node or "")
                    hits.setdefault(task_id, []).append(hit)
        for task_id, task_hits in hits.items():
            self._jobs.put(("logs", task_id, task_hits))

    def custom(self, experiment_id: int, trial_id: int | None, data: dict[str, Any]) -> None:
        """``core.alert()``: send ``data`` to the CUSTOM triggers of the webhooks the experiment
        names in ``integrations.webhooks``."""
        if not any(
            t.trigger_type == CUSTOM for h in self._snapshot.hooks.values() for t in h.triggers
        ):
            return
        custom = {
            "title": str(data.get("title") or ""),
            "description": str(data.get("description") or ""),
            "level": _log_level(data.get("level")),
        }
        self._jobs.put(("custom", experiment_id, trial_id, custom))

    # --- planning (the service's thread) -------------------------------------------------------

    def _plan(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            if job[0] == "barrier":
                job[1].set()
                continue
            try:
                rows = self._plan_job(job)
            except Exception:
                logger.exception("webhooks: planning %s failed", job[0])
                continue
            if rows:
                self.shipper.submit(rows)

    def _plan_job(self, job: tuple[Any, ...]) -> list[WebhookEvent]:
        with self._db.write() as session:
            if job[0] == "logs":
                events = self._log_events(session, job[1], job[2])
            else:
                events = self._custom_events(session, job[1], job[2], job[3])
            rows = [WebhookEvent(url=url, payload=dumps(payload)) for url, payload in events]
            session.add_all(rows)
        return rows

    def _experiment(
        self, session: Session, exp_id: int, state: str | None = None
    ) -> tuple[ExperimentFacts, _Scope] | None:
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
        scope = _Scope(exp.id, _webhook_settings(config), workspace.id if workspace else None)
        return facts, scope

    def _state_events(
        self, session: Session, exp_id: int, state: str
    ) -> list[tuple[str, dict[str, Any]]]:
        found = self._experiment(session, exp_id, state)
        if found is None:
            return []
        facts, scope = found
        out = []
        for hook in self._snapshot.hooks.values():
            for t in hook.triggers:
                fires = t.trigger_type == STATE_CHANGE and t.condition.get("state") == state
                if fires and matches(hook, scope):
                    payload = experiment_event(
                        hook.webhook_type, STATE_CHANGE, facts, self.base_url
                    )
                    out.append((hook.url, payload))
        return out

    def _task_scope(
        self, session: Session, task_id: str
    ) -> tuple[_Scope, tuple[int, int] | None, str]:
        task = session.get(Task, task_id)
        if task is not None and task.trial_id is not None:
            run = session.get(Run, task.trial_id)
            found = self._experiment(session, run.experiment_id) if run is not None else None
            if run is not None and found is not None:
                return found[1], (run.experiment_id, run.id), "TRIAL"
        ntsc = session.get(NtscTask, task_id)
        if ntsc is not None:
            return _Scope(None, None, ntsc.workspace_id), None, ntsc.kind.upper()
        kind = task.task_type if task is not None else "UNKNOWN"
        return _Scope(None, None, None), None, kind

    def _log_events(
        self, session: Session, task_id: str, hits: list[Any]
    ) -> list[tuple[str, dict[str, Any]]]:
        scope, trial, kind = self._task_scope(session, task_id)
        hooks = self._snapshot.hooks
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
                    hook.webhook_type, regex, task_id, node, line, trial, kind, self.base_url
                )
                out.append((hook.url, payload))
        return out

    def _custom_events(
        self, session: Session, exp_id: int, trial_id: int | None, custom: dict[str, str]
    ) -> list[tuple[str, dict[str, Any]]]:
        found = self._experiment(session, exp_id)
        if found is None:
            return []
        facts, scope = found
        settings = scope.config
        if settings is None or settings.get("exclude"):
            return []
        hooks = self._snapshot.hooks
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
                        hook.webhook_type, CUSTOM, facts, self.base_url, custom, trial_id
                    )
                    out.append((hook.url, payload))
        return out
