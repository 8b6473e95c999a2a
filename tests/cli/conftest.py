"""Fixtures for the ``det`` CLI tests: a real master on a free loopback port, a Core API trial as
the model definition, and a private token cache per test."""

from __future__ import annotations

import pathlib
from collections.abc import Callable
from typing import Any

import pytest
import yaml
from cli.harness import TRIAL, Det, experiment_config

from determined.client import Session

# ``det_master``: the root conftest's one master per test module (SQLite, 4 slots).


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
    return det_master.session("admin")  # type: ignore[no-any-return]


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
