"""Fixtures for the SDK tests: a real master on a loopback port, real Core API trials
(``trials/sdk_trial.py``), and an isolated token cache so no test sees another's login."""

from __future__ import annotations

import pathlib
from collections.abc import Iterator
from typing import Any

import pytest
from sdk.harness import TRIALS, WAIT_S, trial_config, trial_logs


@pytest.fixture(autouse=True)
def isolated_login(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A private token cache, no inherited DET_* credentials, and no default SDK session."""
    from determined.experimental import client

    monkeypatch.setenv("DET_CONFIG_DIR", str(tmp_path / "det-config"))
    for name in ("DET_USER", "DET_PASS", "DET_USER_TOKEN", "DET_MASTER", "DET_MASTER_ADDR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(client, "_determined", None)
    yield


@pytest.fixture(scope="module")
def master(module_master: Any) -> Any:
    """One SQLite master shared by the tests of a module (the root conftest's ``module_master``;
    tests look only at their own ids)."""
    return module_master


@pytest.fixture
def any_db_master(db_url: str, make_master: Any) -> Any:
    """A fresh master on SQLite, then on PostgreSQL."""
    return make_master(db_url)


@pytest.fixture
def admin(master: Any) -> Any:
    """A ``Determined`` logged in as ``admin`` to the module's master."""
    from determined.experimental import Determined

    return Determined(master.url, "admin", "")


@pytest.fixture(scope="module")
def finished(master: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A COMPLETED experiment of ``sdk_trial.py`` (3 checkpoints, val_loss 0.5, 0.2, 0.9),
    shared read-only by the tests of a module."""
    import os

    from determined.experimental import Determined

    previous = os.environ.get("DET_CONFIG_DIR")
    os.environ["DET_CONFIG_DIR"] = str(tmp_path_factory.mktemp("finished-login"))
    try:
        sdk = Determined(master.url, "determined", "")
    finally:
        if previous is None:
            os.environ.pop("DET_CONFIG_DIR")
        else:
            os.environ["DET_CONFIG_DIR"] = previous
    exp = sdk.create_experiment(trial_config(labels=["shared"]), TRIALS)
    state = exp.wait(interval=0.05, timeout=WAIT_S)
    assert state.name == "COMPLETED", trial_logs(exp)
    return exp
