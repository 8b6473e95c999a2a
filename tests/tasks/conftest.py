"""Fixtures of the task tests: ``det`` pointed at the module's master (a real one on a loopback
port), sessions of an admin and of a plain user, and helpers that wait for a task's state."""

from __future__ import annotations

import pathlib
import time
from collections.abc import Callable
from typing import Any

import pytest
from cli.harness import Det

from determined.client import Client, Session


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


def wait_for(predicate: Callable[[], Any], what: str, timeout: float = 60.0) -> Any:
    """Poll ``predicate`` until it is truthy (AssertionError naming ``what`` on timeout)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def command_state(api: Client, command_id: str) -> str:
    return str(api.commands.get(command_id)["command"]["state"])


def wait_command(api: Client, command_id: str, *states: str, timeout: float = 60.0) -> str:
    """Wait until the command is in one of ``states`` (default: terminated); the state."""
    wanted = states or ("STATE_TERMINATED",)
    return str(
        wait_for(
            lambda: (s := command_state(api, command_id)) in wanted and s,
            f"command {command_id} to reach {wanted}",
            timeout,
        )
    )


def log_text(session: Session, task_id: str) -> str:
    """Every log line of a task so far, joined."""
    return "".join(e.get("log") or "" for e in Client(session).tasks.logs(task_id))
