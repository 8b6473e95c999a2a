"""Fixtures of the resource-manager tests: an events recorder (the conformance suite's) and a
started local RM."""

from __future__ import annotations

import importlib.util
import os
import pathlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import determined

if importlib.util.find_spec("determined.master") is None:  # det-master not (re)installed yet
    _src = pathlib.Path(__file__).resolve().parents[3] / "packages/master/src/determined"
    determined.__path__.append(str(_src))

from determined.master.rm import AllocationRequest, LaunchSpec, LocalResourceManager
from determined.master.testing.rm_suite import EventsRecorder, make_request


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


def _spec(allocation_id: str, argv: list[str], cwd: pathlib.Path, **kwargs: Any) -> LaunchSpec:
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONUNBUFFERED": "1"}
    env.update(kwargs.pop("env", {}))
    return LaunchSpec(allocation_id=allocation_id, argv=argv, cwd=str(cwd), env=env, **kwargs)


@pytest.fixture(name="make_request")
def make_request_fixture() -> Callable[..., AllocationRequest]:
    """``make_request("1.a.1", slots=2, priority=10)``: an AllocationRequest with defaults."""
    return make_request


@pytest.fixture
def make_spec() -> Callable[..., LaunchSpec]:
    """``make_spec(allocation_id, argv, cwd, env={...}, startup_hook=...)``: a LaunchSpec."""
    return _spec
