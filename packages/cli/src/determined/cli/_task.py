"""``det task list/logs``, and what every task command (cmd, notebook, tensorboard) shares: task logs,
prefix-matched task ids and the list table of upstream's NTSC commands.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Iterator
from typing import Any

from determined import client
from determined.cli import _render, _session
from determined.cli._declarative import Arg, Cmd
from determined.cli._errors import CliError
from determined.cli._logs import LOG_ARGS, log_params, print_logs

TASK_ID = re.compile(
    r"^(?:[0-9]+\.)?[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.I
)
"""A full task id (a UUID, optionally prefixed by ``<n>.``); anything else is a prefix to expand."""

TASK_LOG_ARGS: list[Any] = [
    Arg("--json", action="store_true", help="print each entry as JSON"),
    Arg(
        "--allocation-id",
        dest="allocation_ids",
        action="append",
        help="allocations to show logs from (repeat for several)",
    ),
    *LOG_ARGS,
]
"""The flags of ``det task logs`` (and ``det cmd/notebook/tensorboard logs``)."""

NTSC_HEADERS = ["Id", "Username", "Description", "State", "Exit Status", "Resource Pool"]
"""The columns of ``det cmd list`` (and notebook/shell lists), as upstream prints them."""


def task_logs(session: client.Session, task_id: str, args: argparse.Namespace) -> Iterator[Any]:
    """The log entries of a task selected by the log flags of ``args`` (oldest first)."""
    params = log_params(args)
    if params is None:
        return iter(())
    if getattr(args, "allocation_ids", None):
        params["allocationIds"] = args.allocation_ids
    entries = client.TasksClient(session).logs(task_id, params)
    if getattr(args, "tail", None) is not None:
        return iter(list(entries)[::-1])
    return iter(entries)


def show_task_logs(session: client.Session, task_id: str, args: argparse.Namespace) -> None:
    """Print a task's logs per the flags, then upstream's hint to reopen the stream."""
    try:
        print_logs(task_logs(session, task_id, args), bool(getattr(args, "json", False)))
    finally:
        stream_ended_hint(task_id)


def follow_task_logs(session: client.Session, task_id: str) -> None:
    """Print every line of a task until it ends (``det cmd run`` without ``--detach``)."""
    args = argparse.Namespace(follow=True)
    show_task_logs(session, task_id, args)


def stream_ended_hint(task_id: str) -> None:
    print(
        _render.colored(
            f"Task log stream ended. To reopen log stream, run: det task logs -f {task_id}",
            "green",
            sys.stderr,
        ),
        file=sys.stderr,
    )


def expand_ids(prefixes: list[str], list_ids: Callable[[], list[str]]) -> list[str]:
    """Full task ids for ``prefixes`` (unique prefixes of the ids ``list_ids`` answers)."""
    if all(TASK_ID.match(p) for p in prefixes):
        return prefixes
    known = list_ids()
    out = []
    for prefix in prefixes:
        if TASK_ID.match(prefix):
            out.append(prefix)
            continue
        matches = [i for i in known if i.startswith(prefix)]
        if len(matches) > 1:
            raise CliError(f"partial UUID '{prefix}' not unique")
        if not matches:
            raise CliError(f"partial UUID '{prefix}' not found")
        out.append(matches[0])
    return out


def ntsc_row(item: dict[str, Any]) -> list[Any]:
    """One row of :data:`NTSC_HEADERS`."""
    state = str(item.get("state") or "")
    return [
        item.get("id"),
        item.get("username"),
        item.get("description"),
        state[len("STATE_") :] if state.startswith("STATE_") else state,
        item.get("exitStatus") or "",
        item.get("resourcePool"),
    ]


def list_ntsc(args: argparse.Namespace, items: list[dict[str, Any]]) -> None:
    """Print a list of commands/notebooks/shells: ``-q`` ids only, ``--json``, ``--csv`` or a
    table; sorted by ``--sort-by``/``--order-by`` when given."""
    key = getattr(args, "sort_by", None) or "startTime"
    items = sorted(items, key=lambda i: str(i.get(key) or ""))
    if getattr(args, "order_by", "asc") == "desc":
        items.reverse()
    if getattr(args, "quiet", False):
        for item in items:
            print(item.get("id"))
        return
    if getattr(args, "json", False):
        _render.print_json(items)
        return
    _render.print_table(
        NTSC_HEADERS, [ntsc_row(i) for i in items], bool(getattr(args, "csv", False))
    )


def list_tasks(args: argparse.Namespace) -> None:
    summaries = _session.api(args).tasks.list().get("allocationIdToSummary") or {}
    if args.json:
        _render.print_json(summaries)
        return
    headers = [
        "Task ID",
        "Allocation ID",
        "Name",
        "Slots Needed",
        "Registered Time",
        "Agent",
        "Priority",
        "Resource Pool",
        "Ports",
    ]
    rows = []
    for summary in sorted(summaries.values(), key=lambda s: str(s.get("registeredTime") or "")):
        agents = [a for r in summary.get("resources") or [] for a in (r.get("agentDevices") or {})]
        ports = sorted(p.get("port") for p in summary.get("proxyPorts") or [] if p.get("port"))
        rows.append(
            [
                summary.get("taskId"),
                summary.get("allocationId"),
                summary.get("name"),
                summary.get("slotsNeeded"),
                _render.format_time(summary.get("registeredTime")),
                agents[0] if len(agents) == 1 else (agents or "unassigned"),
                summary.get("priority", "N/A"),
                summary.get("resourcePool"),
                ",".join(str(p) for p in ports),
            ]
        )
    _render.print_table(headers, rows, args.csv)


def logs(args: argparse.Namespace) -> None:
    show_task_logs(_session.setup_session(args), args.task_id, args)


COMMANDS: list[Any] = [
    Cmd(
        "task",
        None,
        "manage tasks (commands, experiments, notebooks, shells, tensorboards)",
        [
            Cmd(
                "list ls",
                list_tasks,
                "list tasks in cluster",
                [
                    Arg("--csv", action="store_true", help="print as CSV"),
                    Arg("--json", action="store_true", help="print as JSON"),
                ],
                default=True,
            ),
            Cmd(
                "logs",
                logs,
                "fetch task logs",
                [Arg("task_id", help="task ID"), *TASK_LOG_ARGS],
            ),
        ],
    )
]
