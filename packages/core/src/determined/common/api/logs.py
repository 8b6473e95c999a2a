"""Upstream's log helpers of ``determined.common.api``: a trial's or a task's log lines."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from determined.client import Session
from determined.common.api import bindings
from determined.common.api._messages import (
    v1LogLevel,
    v1OrderBy,
    v1TaskLogsResponse,
    v1TrialLogsResponse,
)


def pprint_logs(logs: Iterable[v1TrialLogsResponse | v1TaskLogsResponse]) -> None:
    """Print each line's message as it arrives (messages end with their own newline)."""
    for log in logs:
        print(log.message, end="")


def levels_at_or_above(min_level: v1LogLevel | None) -> list[v1LogLevel] | None:
    """The log levels from ``min_level`` up (``None``: no filter)."""
    if min_level is None:
        return None
    levels = list(v1LogLevel)
    return levels[levels.index(min_level) :]


def _check_window(head: int | None, tail: int | None, follow: bool) -> None:
    if sum((head is not None, tail is not None, follow)) > 1:
        raise ValueError("at most one of head, tail, or follow may be set")


def trial_logs(
    session: Session,
    trial_id: int,
    head: int | None = None,
    tail: int | None = None,
    follow: bool = False,
    agent_ids: list[str] | None = None,
    container_ids: list[str] | None = None,
    rank_ids: list[int] | None = None,
    sources: list[str] | None = None,
    stdtypes: list[str] | None = None,
    min_level: v1LogLevel | None = None,
    timestamp_before: str | None = None,
    timestamp_after: str | None = None,
    search_text: str | None = None,
) -> Iterator[v1TrialLogsResponse]:
    """A trial's log lines, oldest first: the first ``head``, the last ``tail``, or all of them
    (``follow`` waits for new lines until the trial ends)."""
    _check_window(head, tail, follow)
    logs = bindings.get_TrialLogs(  # type: ignore[attr-defined]
        session,
        trialId=trial_id,
        agentIds=agent_ids,
        containerIds=container_ids,
        follow=follow or None,
        levels=levels_at_or_above(min_level),
        limit=head or tail,
        orderBy=v1OrderBy.DESC if tail is not None else None,
        rankIds=rank_ids,
        searchText=search_text,
        sources=sources,
        stdtypes=stdtypes,
        timestampBefore=timestamp_before,
        timestampAfter=timestamp_after,
    )
    yield from (logs if tail is None else reversed(list(logs)))


def task_logs(
    session: Session,
    task_id: str,
    head: int | None = None,
    tail: int | None = None,
    follow: bool = False,
    allocation_ids: list[str] | None = None,
    agent_ids: list[str] | None = None,
    container_ids: list[str] | None = None,
    rank_ids: list[int] | None = None,
    sources: list[str] | None = None,
    stdtypes: list[str] | None = None,
    min_level: v1LogLevel | None = None,
    timestamp_before: str | None = None,
    timestamp_after: str | None = None,
) -> Iterator[v1TaskLogsResponse]:
    """A task's log lines, oldest first (``head``/``tail``/``follow`` as for :func:`trial_logs`)."""
    _check_window(head, tail, follow)
    logs = bindings.get_TaskLogs(  # type: ignore[attr-defined]
        session,
        taskId=task_id,
        allocationIds=allocation_ids,
        agentIds=agent_ids,
        containerIds=container_ids,
        follow=follow or None,
        levels=levels_at_or_above(min_level),
        limit=head or tail,
        orderBy=v1OrderBy.DESC if tail is not None else None,
        rankIds=rank_ids,
        sources=sources,
        stdtypes=stdtypes,
        timestampBefore=timestamp_before,
        timestampAfter=timestamp_after,
    )
    yield from (logs if tail is None else reversed(list(logs)))
