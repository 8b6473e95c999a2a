"""End-to-end fixtures: a real det master on a free loopback port, driven over its HTTP API."""

from __future__ import annotations

import pathlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from e2e.harness import MasterAPI

from determined.master import Master, MasterConfig


@pytest.fixture
def master_factory(tmp_path: pathlib.Path) -> Iterator[Callable[..., Master]]:
    started: list[Master] = []

    def start(**settings: Any) -> Master:
        settings.setdefault("port", 0)
        settings.setdefault("data_dir", str(tmp_path / f"master{len(started)}"))
        settings.setdefault("slots", 8)
        master = Master(MasterConfig(**settings))
        master.start()
        started.append(master)
        return master

    yield start
    for master in reversed(started):
        master.stop()


@pytest.fixture
def api(master_factory: Callable[..., Master]) -> MasterAPI:
    return MasterAPI(master_factory().url)
