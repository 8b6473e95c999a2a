"""Fixtures for the Hydra tests: one real det master per test module on a free loopback port, and a
private token cache per test (nothing is written to the user's config dir)."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest
from e2e.harness import MasterAPI


@pytest.fixture(scope="module")
def det_master(make_module_master: Any) -> Any:
    """A running master with 8 slots shared by the tests of a module (each test creates its own
    experiments; sweeps run several trials at once)."""
    return make_module_master(slots=8)


@pytest.fixture
def api(det_master: Any) -> MasterAPI:
    """A logged-in client of the module's master (the e2e harness)."""
    return det_master.api()  # type: ignore[no-any-return]


@pytest.fixture(autouse=True)
def private_det_env(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Token cache in tmp_path; no DET_MASTER/DET_USER from the environment leaks into a test."""
    monkeypatch.setenv("DET_CONFIG_DIR", str(tmp_path / "det-config"))
    for name in ("DET_MASTER", "DET_MASTER_ADDR", "DET_USER", "DET_PASS", "DET_USER_TOKEN"):
        monkeypatch.delenv(name, raising=False)
