"""Fixtures of the resource-manager tests: an events recorder and a started local RM."""

from __future__ import annotations

import importlib.util
import os
import pathlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import determined

if importlib.util.find_spec("determined.master") is None:  # det-master not (re)installed yet
    _src = pathlib.Path(__file__).resolve().parents[3] / "packages/master/src/determined"
    determined.__path__.append(str(_src))

from determined.master.rm import (
    AllocationRequest,
    Assignment,
    LaunchSpec,
    LocalResourceManager,
    LogLine,
)

WAIT_S = 20.0


class EventsRecorder:
    """Records every ResourceManagerEvents call; tests wait on conditions over what was recorded."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.calls: list[tuple[str, Any]] = []
        self.assigned: dict[str, Assignment] = {}
        self.started: dict[str, int] = {}
        self.logs: dict[str, list[LogLine]] = {}
        self.batches: dict[str, int] = {}
        self.exited: dict[str, tuple[int | None, str | None]] = {}
        self.exit_counts: dict[str, int] = {}
        self.on_assigned: Callable[[AllocationRequest, Assignment], None] | None = None

    def _record(self, name: str, allocation_id: str, value: Any) -> None:
        with self.cond:
            self.calls.append((name, allocation_id))
            self.cond.notify_all()

    def allocation_assigned(self, request: AllocationRequest, assignment: Assignment) -> None:
        with self.cond:
            self.assigned[request.allocation_id] = assignment
        self._record("assigned", request.allocation_id, assignment)
        if self.on_assigned is not None:
            self.on_assigned(request, assignment)

    def allocation_started(self, allocation_id: str, pid: int) -> None:
        with self.cond:
            self.started[allocation_id] = pid
        self._record("started", allocation_id, pid)

    def allocation_log(self, allocation_id: str, lines: list[LogLine]) -> None:
        with self.cond:
            self.logs.setdefault(allocation_id, []).extend(lines)
            self.batches[allocation_id] = self.batches.get(allocation_id, 0) + 1
        self._record("log", allocation_id, lines)

    def allocation_exited(
        self, allocation_id: str, exit_code: int | None, error: str | None
    ) -> None:
        with self.cond:
            self.exited[allocation_id] = (exit_code, error)
            self.exit_counts[allocation_id] = self.exit_counts.get(allocation_id, 0) + 1
        self._record("exited", allocation_id, (exit_code, error))

    def wait_for(self, predicate: Callable[[], bool], timeout: float = WAIT_S) -> None:
        """Wait until ``predicate()`` (evaluated under the lock) holds; fail after ``timeout``."""
        with self.cond:
            if not self.cond.wait_for(predicate, timeout):
                raise AssertionError(f"timed out; calls so far: {self.calls}")

    def wait_assigned(self, allocation_id: str) -> Assignment:
        self.wait_for(lambda: allocation_id in self.assigned)
        return self.assigned[allocation_id]

    def wait_exited(self, allocation_id: str) -> tuple[int | None, str | None]:
        self.wait_for(lambda: allocation_id in self.exited)
        return self.exited[allocation_id]

    def wait_started(self, allocation_id: str) -> int:
        self.wait_for(lambda: allocation_id in self.started)
        return self.started[allocation_id]

    def messages(self, allocation_id: str) -> list[str]:
        with self.cond:
            return [line.message for line in self.logs.get(allocation_id, [])]


@pytest.fixture
def events() -> EventsRecorder:
    return EventsRecorder()


@pytest.fixture
def local_rm(events: EventsRecorder) -> Iterator[LocalResourceManager]:
    rm = LocalResourceManager(slots=2, slot_type="cpu")
    rm.start(events)
    try:
        yield rm
    finally:
        rm.close()


def _request(allocation_id: str, slots: int = 1, **kwargs: Any) -> AllocationRequest:
    kwargs.setdefault("task_id", allocation_id.split(".")[0])
    kwargs.setdefault("job_id", "exp-1")
    kwargs.setdefault("submitted_at", time.time())
    return AllocationRequest(allocation_id=allocation_id, slots=slots, **kwargs)


def _spec(allocation_id: str, argv: list[str], cwd: pathlib.Path, **kwargs: Any) -> LaunchSpec:
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONUNBUFFERED": "1"}
    env.update(kwargs.pop("env", {}))
    return LaunchSpec(allocation_id=allocation_id, argv=argv, cwd=str(cwd), env=env, **kwargs)


@pytest.fixture
def make_request() -> Callable[..., AllocationRequest]:
    """``make_request("1.a.1", slots=2, priority=10)``: an AllocationRequest with defaults."""
    return _request


@pytest.fixture
def make_spec() -> Callable[..., LaunchSpec]:
    """``make_spec(allocation_id, argv, cwd, env={...}, startup_hook=...)``: a LaunchSpec."""
    return _spec
