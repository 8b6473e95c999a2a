"""Fixtures for the Hydra tests: one real det master per test module on a free loopback port, and a
private token cache per test (nothing is written to the user's config dir)."""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

import pytest
from e2e.harness import MasterAPI

from determined.master import Master, MasterConfig


@pytest.fixture(scope="module")
def det_master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Master]:
    """A running master shared by the tests of a module (each test creates its own experiments)."""
    master = Master(
        MasterConfig(
            host="127.0.0.1", port=0, data_dir=str(tmp_path_factory.mktemp("master")), slots=8
        )
    )
    master.start()
    try:
        yield master
    finally:
        master.stop()


@pytest.fixture
def api(det_master: Master) -> MasterAPI:
    """A logged-in client of the module's master (the e2e harness)."""
    return MasterAPI(det_master.url)


@pytest.fixture(autouse=True)
def private_det_env(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Token cache in tmp_path; no DET_MASTER/DET_USER from the environment leaks into a test."""
    monkeypatch.setenv("DET_CONFIG_DIR", str(tmp_path / "det-config"))
    for name in ("DET_MASTER", "DET_MASTER_ADDR", "DET_USER", "DET_PASS", "DET_USER_TOKEN"):
        monkeypatch.delenv(name, raising=False)
