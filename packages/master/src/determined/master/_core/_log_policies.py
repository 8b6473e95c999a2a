"""Experiment ``log_policies``: trial output matched against the policies' patterns as it is stored.

A policy is ``{name, pattern, action}`` (``action`` ``cancel_retries`` or ``exclude_node``, or the
legacy ``{type: ...}`` object; a policy may have no action and only name what matched). When a line
of a trial's output matches, the first such line of each allocation is kept in
``log_policy_matches`` and the policy's name (when it has one) on the trial (``logPolicyMatched``).
What happens next is decided when the trial fails (:func:`failure_verdict`, called by
``TrialExits``): a ``cancel_retries`` match ends the trial in ERROR without a restart; an
``exclude_node`` match keeps the restart off the node the matching allocation ran on; a trial with
no node left to run on errors (upstream's ``launch_error: true``).

Lines are matched with Python's ``re.search`` (upstream's Go ``MatchString``: anywhere in the line).
A line holding ``"log_policies":`` is skipped: it is the experiment config being printed, and would
match its own patterns.
"""

from __future__ import annotations

import collections
import dataclasses
import re
import socket
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import Engine, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from determined.master.db import Allocation, Experiment, Run, Task, TaskLog
from determined.master.db._log_policy_models import LogPolicyMatch

CANCEL_RETRIES = "cancel_retries"
EXCLUDE_NODE = "exclude_node"
_CONFIG_LINE = re.compile(r'"log_policies":')
_CACHE_SIZE = 1024


@dataclasses.dataclass(frozen=True)
class LogPolicy:
    """One policy of an experiment's ``log_policies`` with its compiled pattern."""

    name: str | None
    pattern: str
    action: str
    """``cancel_retries``, ``exclude_node`` or '' (no action)."""
    regex: re.Pattern[str]


def parse_policies(config: Mapping[str, Any]) -> tuple[LogPolicy, ...]:
    """The policies of an experiment config that have a pattern (a policy with only a name is how a
    user switches off a default one; such entries are skipped). Invalid patterns are skipped too:
    config validation rejects them, so only an old stored config can hold one."""
    out = []
    for entry in config.get("log_policies") or ():
        if not isinstance(entry, Mapping) or not isinstance(entry.get("pattern"), str):
            continue
        action = entry.get("action")
        if isinstance(action, Mapping):  # legacy {type: cancel_retries}
            action = action.get("type")
        try:
            regex = re.compile(_searchable(entry["pattern"]))
        except re.error:
            continue
        name = entry.get("name")
        out.append(
            LogPolicy(
                name=name if isinstance(name, str) and name else None,
                pattern=entry["pattern"],
                action=action if action in (CANCEL_RETRIES, EXCLUDE_NODE) else "",
                regex=regex,
            )
        )
    return tuple(out)


def _searchable(pattern: str) -> str:
    """``pattern`` without a leading or trailing ``.*``: the same lines match under ``re.search``,
    and the default ``.*CUDA out of memory.*`` does not take quadratic time on a 64 KiB line."""
    if pattern.startswith(".*") and pattern[2:3] not in ("*", "+", "?", "{"):
        pattern = pattern[2:]
    if pattern.endswith(".*"):
        body = pattern[:-2]
        backslashes = len(body) - len(body.rstrip("\\"))
        if backslashes % 2 == 0:
            pattern = body
    return pattern


class _PolicyCache:
    """Each task's parsed policies (empty for tasks that are not trials), most recent first, per
    database engine: task ids repeat across databases (``<experiment id>.<request id>``, the request
    id drawn from a seed that defaults to the current second), and one process may serve several
    masters (tests, embedded masters), so a task id alone would hand one master another's policies.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_engine: weakref.WeakKeyDictionary[
            Engine, collections.OrderedDict[str, tuple[LogPolicy, ...]]
        ] = weakref.WeakKeyDictionary()

    def get(self, session: Session, task_id: str) -> tuple[LogPolicy, ...]:
        engine = session.connection().engine
        with self._lock:
            by_task = self._by_engine.get(engine)
            if by_task is None:
                by_task = self._by_engine[engine] = collections.OrderedDict()
            found = by_task.get(task_id)
            if found is not None:
                by_task.move_to_end(task_id)
                return found
        config = session.scalar(
            select(Experiment.config)
            .join(Run, Run.experiment_id == Experiment.id)
            .join(Task, Task.trial_id == Run.id)
            .where(Task.task_id == task_id)
        )
        policies = parse_policies(config) if isinstance(config, Mapping) else ()
        with self._lock:
            by_task[task_id] = policies
            while len(by_task) > _CACHE_SIZE:
                by_task.popitem(last=False)
        return policies


_cache = _PolicyCache()


def monitor(session: Session, rows: Sequence[TaskLog]) -> None:
    """Match task output lines about to be stored (in ``session``) against their experiments'
    policies, and record the matches in the same transaction."""
    by_task: dict[str, list[TaskLog]] = {}
    for row in rows:
        by_task.setdefault(row.task_id, []).append(row)
    for task_id, lines in by_task.items():
        policies = _cache.get(session, task_id)
        if not policies:
            continue
        for policy in policies:
            for line in lines:
                text = line.log or ""
                if policy.regex.search(text) and not _CONFIG_LINE.search(text):
                    _record(session, policy, line)
                    break  # the first matching line of a batch is enough


def _record(session: Session, policy: LogPolicy, line: TaskLog) -> None:
    allocation_id = line.allocation_id or ""
    seen = session.scalar(
        select(LogPolicyMatch.id).where(
            LogPolicyMatch.task_id == line.task_id,
            LogPolicyMatch.allocation_id == allocation_id,
            LogPolicyMatch.regex == policy.pattern,
            LogPolicyMatch.action == policy.action,
        )
    )
    if seen is None:
        try:
            with session.begin_nested():  # a concurrent batch may have recorded it first
                session.add(
                    LogPolicyMatch(
                        task_id=line.task_id,
                        allocation_id=allocation_id,
                        policy_name=policy.name,
                        regex=policy.pattern,
                        action=policy.action,
                        triggering_log=(line.log or "").rstrip("\n"),
                    )
                )
        except IntegrityError:
            pass
    if policy.name is not None:
        run = session.scalar(
            select(Run).join(Task, Task.trial_id == Run.id).where(Task.task_id == line.task_id)
        )
        if run is not None:
            run.log_policy_matched = policy.name


@dataclasses.dataclass(frozen=True)
class FailureVerdict:
    """What the log policies say about a failed trial."""

    retry: bool
    """False: a ``cancel_retries`` policy matched (the trial ends in ERROR)."""
    excluded_nodes: frozenset[str]
    """Nodes the trial must not run on again (``exclude_node`` matches)."""


def failure_verdict(
    session: Session,
    run: Run,
    node_of_pool: Callable[[str], str],
    allocation_id: str | None = None,
) -> FailureVerdict:
    """Read the matches of ``run``'s task after it failed and write upstream's log lines for them:
    the don't-retry lines, or a line per node excluded by the output of ``allocation_id`` (every
    allocation's when None: after a master restart). ``node_of_pool`` names the node (the agent of
    ``/api/v1/agents``) an allocation of that resource pool ran on."""
    from determined.master._core._task_logs import master_log  # it imports this module

    matches = list(
        session.scalars(
            select(LogPolicyMatch)
            .where(LogPolicyMatch.task_id == run.task_id, LogPolicyMatch.action != "")
            .order_by(LogPolicyMatch.id)
        )
    )
    dont_retry = _first_per_regex(m for m in matches if m.action == CANCEL_RETRIES)
    if dont_retry:
        master_log(
            session,
            run.task_id,
            "trial failed and matched logs to a don't retry policy",
            "LOG_LEVEL_ERROR",
        )
        for match in dont_retry:
            master_log(
                session,
                run.task_id,
                f"(log {_quote(match.triggering_log)} matched regex {_quote(match.regex)})",
                "LOG_LEVEL_ERROR",
            )
        return FailureVerdict(retry=False, excluded_nodes=frozenset())
    excluded = [m for m in matches if m.action == EXCLUDE_NODE]
    pools = _allocation_pools(session, {m.allocation_id for m in excluded})
    nodes: set[str] = set()
    for match in excluded:
        node = node_of_pool(pools.get(match.allocation_id, "default"))
        announce = allocation_id is None or match.allocation_id in (allocation_id, "")
        if node not in nodes and announce:
            master_log(
                session,
                run.task_id,
                f"(log {_quote(match.triggering_log)} matched regex {match.regex})"
                f" therefore will not schedule on {node}",
                "LOG_LEVEL_ERROR",
            )
        nodes.add(node)
    return FailureVerdict(retry=True, excluded_nodes=frozenset(nodes))


def node_of_pool(rm: Any, pool: str) -> str:
    """The node an allocation of ``pool`` runs on, named as ``/api/v1/agents`` names it: each of
    det's resource managers shows one agent per pool (this machine's host name for the local one,
    ``<type>-<pool>`` for the others)."""
    kind = "local"
    describe = getattr(rm, "describe", None)
    if callable(describe):
        try:
            kind = str(describe().get("type") or "local")
        except Exception:
            kind = "local"
    return socket.gethostname() if kind == "local" else f"{kind}-{pool}"


def _first_per_regex(matches: Iterable[LogPolicyMatch]) -> list[LogPolicyMatch]:
    out: dict[str, LogPolicyMatch] = {}
    for match in matches:
        out.setdefault(match.regex, match)
    return list(out.values())


def _allocation_pools(session: Session, allocation_ids: set[str]) -> dict[str, str]:
    ids = [a for a in allocation_ids if a]
    if not ids:
        return {}
    rows = session.execute(
        select(Allocation.allocation_id, Allocation.resource_pool).where(
            Allocation.allocation_id.in_(ids)
        )
    )
    return {aid: pool or "default" for aid, pool in rows}


def _quote(text: str) -> str:
    """A Go ``%q``-style quoted string (double quotes, backslash escapes)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
