"""Noticing what fires webhooks, and planning the events on the service's own thread.

An experiment's state change is noticed by an attribute listener on ``Experiment.state``; its
events are queued in the same transaction (which holds the experiment row already) and posted the
moment it commits. Log lines (``task_logs`` rows a flush writes) are matched against the TASK_LOG
triggers' regexes once the transaction that stores them commits, and alerts arrive from their
route. Log and alert events are planned (scopes matched, payloads built, the queue written) on
:class:`WebhookEvents`' thread; every post happens on the shipper's pool, so no request and no
trial report waits for one.
"""

from __future__ import annotations

import logging
import queue
import re
import threading
from typing import Any

from sqlalchemy import event
from sqlalchemy.orm import Session, object_session

from determined.master._core._webhook_delivery import WebhookShipper
from determined.master._core._webhook_payloads import dumps
from determined.master._core._webhook_planning import custom_events, log_events, state_events
from determined.master._core._webhook_snapshot import CUSTOM, WebhookRegistry
from determined.master.db import Database, Experiment, TaskLog, Workspace
from determined.master.db._webhook_models import WebhookEvent

logger = logging.getLogger("determined.master")

_CONFIG_LINE = re.compile(r'"log_policies":')
"""A line printing an experiment config holds the patterns themselves; it never matches (upstream)."""

_STATES_KEY = "det_webhook_states"
_LOGS_KEY = "det_webhook_log_lines"
_ROWS_KEY = "det_webhook_event_rows"
_RELOAD_KEY = "det_webhook_reload"


@event.listens_for(Experiment.state, "set")
def _state_set(target: Experiment, value: Any, oldvalue: Any, _initiator: Any) -> None:
    if value == oldvalue or target.id is None:
        return
    session = object_session(target)
    if session is not None:
        session.info.setdefault(_STATES_KEY, []).append((target.id, value))


def _log_level(value: Any) -> str:
    return str(value or "").upper().removeprefix("LOG_LEVEL_").replace("UNSPECIFIED", "")


class WebhookEvents:
    """Turns state changes, log lines and alerts into queued, submitted webhook events."""

    def __init__(self, db: Database, registry: WebhookRegistry, shipper: WebhookShipper) -> None:
        self._db = db
        self._registry = registry
        self._shipper = shipper
        self.base_url = ""
        """The web UI's address for links in Slack messages ('' for none)."""
        self._jobs: queue.SimpleQueue[tuple[Any, ...] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        event.listen(db._sessions, "after_flush", self._after_flush)
        event.listen(db._sessions, "before_commit", self._before_commit)
        event.listen(db._sessions, "after_commit", self._after_commit)
        event.listen(db._sessions, "after_soft_rollback", self._after_rollback)

    # --- lifecycle -----------------------------------------------------------------------------

    def start(self) -> bool:
        """Start the planning thread; False when it was running already."""
        if self._thread is not None:
            return False
        self._thread = threading.Thread(target=self._plan, name="det-webhooks", daemon=True)
        self._thread.start()
        return True

    def stop(self) -> None:
        """Stop the planning thread (after the jobs queued before this call)."""
        if self._thread is not None:
            self._jobs.put(None)
            self._thread.join(timeout=5)
            self._thread = None

    def wait_idle(self, timeout: float = 10.0) -> None:
        """Block until the jobs queued so far are planned (tests)."""
        done = threading.Event()
        self._jobs.put(("barrier", done))
        done.wait(timeout)

    # --- intake (cheap, on the caller's thread) ------------------------------------------------

    def _after_flush(self, session: Session, _context: Any) -> None:
        """Note the log lines a task shipped or its output the resource manager forwarded (rows
        added through the ORM; the master's own lines are inserted directly and never match),
        and deleted workspaces (their webhooks went with them)."""
        snapshot = self._registry.snapshot
        if snapshot.hooks and any(isinstance(o, Workspace) for o in session.deleted):
            session.info[_RELOAD_KEY] = True
        if not snapshot.patterns:
            return
        lines = [(o.task_id, o.log, o.agent_id) for o in session.new if isinstance(o, TaskLog)]
        if lines:
            session.info.setdefault(_LOGS_KEY, []).extend(lines)

    def _before_commit(self, session: Session) -> None:
        """Queue the events of the experiment state changes this transaction makes, in it: they
        are posted the moment it commits, before a client polling the experiment can see the new
        state (upstream's e2e tests stop their receiver right then)."""
        changes = session.info.pop(_STATES_KEY, None)
        wanted = self._registry.snapshot.states
        if not changes or not wanted:
            return
        try:
            events = []
            for exp_id, state in changes:
                if state in wanted:
                    snapshot = self._registry.snapshot
                    events += state_events(session, snapshot, exp_id, state, self.base_url)
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
            self._shipper.submit(rows)
        lines = session.info.pop(_LOGS_KEY, None)
        if lines:
            self.scan_logs(lines)
        if session.info.pop(_RELOAD_KEY, False):
            self._registry.reload()

    def _after_rollback(self, session: Session, _previous: Any = None) -> None:
        for key in (_STATES_KEY, _LOGS_KEY, _ROWS_KEY, _RELOAD_KEY):
            session.info.pop(key, None)

    def scan_logs(self, lines: list[tuple[str, str, str | None]]) -> None:
        """Match stored log lines ``(task id, text, node)`` against the TASK_LOG triggers; a
        match is planned and sent on the service's thread."""
        patterns = self._registry.snapshot.patterns
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
        hooks = self._registry.snapshot.hooks
        if not any(t.trigger_type == CUSTOM for h in hooks.values() for t in h.triggers):
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
                self._shipper.submit(rows)

    def _plan_job(self, job: tuple[Any, ...]) -> list[WebhookEvent]:
        with self._db.write() as session:
            snapshot = self._registry.snapshot
            if job[0] == "logs":
                events = log_events(session, snapshot, job[1], job[2], self.base_url)
            else:
                events = custom_events(session, snapshot, job[1], job[2], job[3], self.base_url)
            rows = [WebhookEvent(url=url, payload=dumps(payload)) for url, payload in events]
            session.add_all(rows)
        return rows
