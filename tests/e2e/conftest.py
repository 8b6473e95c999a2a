"""End-to-end fixtures: a real det master on a free loopback port, driven over its HTTP API."""

from __future__ import annotations

import pathlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from e2e.harness import MasterAPI
from postgres_db import drop_database, postgres_url

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

    def stop_all() -> None:
        while started:
            started.pop().stop()

    start.stop_all = stop_all  # type: ignore[attr-defined]
    yield start
    stop_all()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def api(
    request: pytest.FixtureRequest, master_factory: Callable[..., Master]
) -> Iterator[MasterAPI]:
    """A logged-in client of a fresh master on SQLite, then on PostgreSQL."""
    if request.param == "sqlite":
        yield MasterAPI(master_factory().url)
        return
    url = postgres_url()
    try:
        yield MasterAPI(master_factory(db=url).url)
    finally:
        master_factory.stop_all()  # type: ignore[attr-defined]
        drop_database(url)
