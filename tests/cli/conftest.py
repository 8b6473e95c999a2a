"""Fixtures for the ``det`` CLI tests: a real master on a free loopback port, a Core API trial as
the model definition, and a private token cache per test."""

from __future__ import annotations

import pathlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import yaml
from cli.harness import TRIAL, Det, experiment_config

from determined.client import Session


@pytest.fixture(scope="module")
def det_master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One master per test module (SQLite, 4 slots) on a free loopback port."""
    from determined.master import Master, MasterConfig

    data = tmp_path_factory.mktemp("master")
    master = Master(MasterConfig(host="127.0.0.1", port=0, data_dir=str(data), slots=4))
    master.start()
    yield master
    master.stop()


@pytest.fixture
def det(
    det_master: Any,
    tmp_path: pathlib.Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> Det:
    """``det`` pointed at the module's master, with a private token cache."""
    config_dir = tmp_path / "det-config"
    for name in ("DET_USER", "DET_PASS", "DET_USER_TOKEN", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DET_MASTER", det_master.url)
    monkeypatch.setenv("DET_CONFIG_DIR", str(config_dir))
    return Det(det_master.url, config_dir, capsys)


@pytest.fixture
def api(det_master: Any) -> Session:
    """An admin session to the module's master, for checking what the CLI did."""
    token = Session(det_master.url).request(
        "POST", "/api/v1/auth/login", body={"username": "admin", "password": ""}
    )["token"]
    return Session(det_master.url, token)


@pytest.fixture
def context_dir(tmp_path: pathlib.Path) -> pathlib.Path:
    """A model definition directory holding the Core API test trial."""
    path = tmp_path / "context"
    path.mkdir()
    (path / "train.py").write_text(TRIAL)
    return path


@pytest.fixture
def write_config(tmp_path: pathlib.Path) -> Callable[..., pathlib.Path]:
    """``write_config(**overrides)``: an experiment config file for the test trial."""
    counter = iter(range(1_000_000))

    def write(**overrides: Any) -> pathlib.Path:
        path = tmp_path / f"experiment{next(counter)}.yaml"
        path.write_text(yaml.safe_dump(experiment_config(**overrides)))
        return path

    return write
