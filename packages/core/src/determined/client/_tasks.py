"""Tasks beyond trials: the resource clients for ``/api/v1/tasks/...`` and ``/api/v1/commands``."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from determined.client import _routes as r
from determined.client._session import Session

Params = Mapping[str, Any]


class TasksClient:
    """Any task by its id: trials' tasks, commands, TensorBoards, notebooks and shells."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def list(self) -> dict[str, Any]:
        """The allocations holding slots now (``allocationIdToSummary``), as ``det task list``
        shows them."""
        return r.call(self.session, r.TASKS)

    def get(self, task_id: str) -> dict[str, Any]:
        """One task (``task``: ``taskId``, ``taskType``, ``allocations``, times)."""
        return r.call(self.session, r.TASK_GET, task_id=task_id)

    def kill(self, task_id: str) -> dict[str, Any]:
        """Stop a command, TensorBoard, notebook or shell (its owner or an admin)."""
        return r.call(self.session, r.TASK_KILL, body={"taskId": task_id}, task_id=task_id)

    def count(self) -> dict[str, Any]:
        """How many ``commands``, ``notebooks``, ``shells`` and ``tensorboards`` have not ended."""
        return r.call(self.session, r.TASKS_COUNT)

    def logs(
        self, task_id: str, params: Params | None = None, *, timeout: float | None = None
    ) -> Iterator[dict[str, Any]]:
        """The task's log entries as the master streams them (``follow`` keeps the stream open
        until the task ends)."""
        return r.stream(self.session, r.TASK_LOGS, params=params, timeout=timeout, task_id=task_id)


class CommandsClient:
    """Commands: one process running a command line on the cluster's resources."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def launch(
        self, config: Mapping[str, Any], files: Sequence[Mapping[str, Any]] = ()
    ) -> dict[str, Any]:
        """Start a command (``config.entrypoint``) with ``files`` (``read_context_dir``) as its
        working directory: ``command`` and ``config``."""
        body = {"config": dict(config), "files": [dict(f) for f in files]}
        return r.call(self.session, r.COMMAND_LAUNCH, body=body)

    def list(
        self, users: Sequence[str] | None = None, params: Params | None = None
    ) -> dict[str, Any]:
        """Commands (``commands``, ``pagination``); ``users`` keeps those of these usernames."""
        query = dict(params or {})
        if users is not None:
            query["users"] = list(users)
        return r.call(self.session, r.COMMANDS, params=query)

    def get(self, command_id: str) -> dict[str, Any]:
        """One command and its config (``command``, ``config``)."""
        return r.call(self.session, r.COMMAND_GET, command_id=command_id)

    def kill(self, command_id: str) -> dict[str, Any]:
        """Stop a command (``command``)."""
        return r.call(self.session, r.COMMAND_KILL, body={}, command_id=command_id)

    def set_priority(self, command_id: str, priority: int) -> dict[str, Any]:
        """Change a command's priority (1..99) while it waits for slots (``command``)."""
        body = {"priority": int(priority)}
        return r.call(self.session, r.COMMAND_SET_PRIORITY, body=body, command_id=command_id)
