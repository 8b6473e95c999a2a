"""End-to-end fixtures: a real det master on a free loopback port, driven over its HTTP API."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import pytest
from e2e.harness import MasterAPI


@pytest.fixture
def master_factory(make_master: Any) -> Callable[..., Any]:
    """The root conftest's ``make_master`` with 8 slots: searches run several trials at once."""
    return functools.partial(make_master, slots=8)


@pytest.fixture
def api(db_url: str, master_factory: Callable[..., Any]) -> MasterAPI:
    """A logged-in client of a fresh master on SQLite, then on PostgreSQL."""
    return master_factory(db_url).api()  # type: ignore[no-any-return]
