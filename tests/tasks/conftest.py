"""Fixtures of the task tests: ``det`` pointed at the module's master (a real one on a loopback
port), and clients of an admin and of a plain user (helpers are in ``tasks.harness``)."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest
from cli.harness import Det

from determined.client import Client


@pytest.fixture
def det(
    det_master: Any,
    tmp_path: pathlib.Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> Det:
    """``det`` against the module's master (in-process ``run`` or the script ``sh``), logged in
    on demand as ``determined`` (the default user) with a private token cache."""
    config_dir = tmp_path / "det-config"
    for name in ("DET_USER", "DET_PASS", "DET_USER_TOKEN", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DET_MASTER", det_master.url)
    monkeypatch.setenv("DET_CONFIG_DIR", str(config_dir))
    return Det(det_master.url, config_dir, capsys)


@pytest.fixture
def admin(det_master: Any) -> Client:
    """An admin's client of the module's master."""
    return Client(det_master.session("admin"))


@pytest.fixture
def user(det_master: Any) -> Client:
    """The plain user ``determined``'s client of the module's master."""
    return Client(det_master.session("determined"))
