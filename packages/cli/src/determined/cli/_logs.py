"""Trial and task logs: the shared flags, the query, and printing (as upstream's CLI does)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from typing import Any

from determined import client
from determined.cli import _render
from determined.cli._declarative import Arg, Group
from determined.cli._errors import CliError

LOG_LEVELS = ["TRACE", "DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]
"""Upstream's ``v1LogLevel`` names in increasing severity (``--level X`` means X or worse)."""

LOG_ARGS: list[Any] = [
    Arg(
        "-f",
        "--follow",
        action="store_true",
        help="follow the logs of a running trial, similar to tail -f",
    ),
    Group(
        Arg("--head", type=int, help="number of lines to show, counting from the beginning"),
        Arg("--tail", type=int, help="number of lines to show, counting from the end"),
    ),
    Arg("--agent-id", dest="agent_ids", action="append", help="agents to show logs from"),
    Arg(
        "--container-id", dest="container_ids", action="append", help="containers to show logs from"
    ),
    Arg("--rank-id", dest="rank_ids", type=int, action="append", help="ranks to show logs from"),
    Arg("--timestamp-before", help="only logs before this time (RFC 3339)"),
    Arg("--timestamp-after", help="only logs after this time (RFC 3339)"),
    Arg(
        "--level",
        dest="level",
        choices=LOG_LEVELS,
        help="show logs with this level or higher",
    ),
    Arg("--source", dest="sources", action="append", help="sources to show logs from"),
    Arg("--stdtype", dest="stdtypes", action="append", help="output streams to show logs from"),
]


def levels_at_or_above(level: str | None) -> list[str] | None:
    """``WARNING`` -> the wire names of WARNING, ERROR and CRITICAL."""
    if level is None:
        return None
    return [f"LOG_LEVEL_{name}" for name in LOG_LEVELS[LOG_LEVELS.index(level) :]]


def log_params(args: argparse.Namespace) -> dict[str, Any] | None:
    """The log query of the log flags of ``args`` (None: ``--head 0``/``--tail 0``, nothing)."""
    head = getattr(args, "head", None)
    tail = getattr(args, "tail", None)
    follow = bool(getattr(args, "follow", False))
    if follow and (head is not None or tail is not None):
        raise CliError("--follow cannot be combined with --head or --tail")
    for name, value in (("--head", head), ("--tail", tail)):
        if value is not None and value < 0:
            raise CliError(f"{name}: must be >= 0, got {value}")
    params: dict[str, Any] = {
        "follow": "true" if follow else None,
        "limit": head if head is not None else tail,
        "orderBy": "ORDER_BY_DESC" if tail is not None else None,
        "levels": levels_at_or_above(getattr(args, "level", None)),
        "agentIds": getattr(args, "agent_ids", None),
        "containerIds": getattr(args, "container_ids", None),
        "rankIds": getattr(args, "rank_ids", None),
        "sources": getattr(args, "sources", None),
        "stdtypes": getattr(args, "stdtypes", None),
        "timestampBefore": getattr(args, "timestamp_before", None),
        "timestampAfter": getattr(args, "timestamp_after", None),
    }
    if (head is not None or tail is not None) and not (head or tail):
        return None  # --head 0 / --tail 0: nothing (a limit of 0 means "all" on the wire)
    return params


def trial_logs(session: client.Session, trial_id: int, args: argparse.Namespace) -> Iterator[Any]:
    """The log entries of a trial selected by the log flags of ``args`` (oldest first)."""
    params = log_params(args)
    if params is None:
        return iter(())
    entries = client.TrialsClient(session).logs(trial_id, params)
    if getattr(args, "tail", None) is not None:
        return iter(list(entries)[::-1])
    return iter(entries)


def print_logs(entries: Iterator[Any], as_json: bool = False) -> None:
    """Print each entry's message (or the entry as JSON), flushing as lines arrive."""
    for entry in entries:
        if as_json:
            _render.print_json(entry)
        else:
            message = str(entry.get("message") or entry.get("log") or "")
            sys.stdout.write(message if message.endswith("\n") else message + "\n")
        sys.stdout.flush()


def stream_ended_hint(trial_id: int) -> None:
    """Upstream's closing hint (on stderr here, so piped or ``--json`` output stays clean)."""
    print(
        _render.colored(
            f"Trial log stream ended. To reopen log stream, run: det trial logs -f {trial_id}",
            "green",
            sys.stderr,
        ),
        file=sys.stderr,
    )


def show_trial_logs(session: client.Session, trial_id: int, args: argparse.Namespace) -> None:
    """Print a trial's logs per the flags, then the hint to reopen the stream."""
    try:
        print_logs(trial_logs(session, trial_id, args), bool(getattr(args, "json", False)))
    except KeyboardInterrupt:
        stream_ended_hint(trial_id)
        raise
    stream_ended_hint(trial_id)
