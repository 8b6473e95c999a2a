"""Helpers the SDK tests share: the trial directory, a config for it, polling (masters come from
the root conftest)."""

from __future__ import annotations

import pathlib
import time
from collections.abc import Callable
from typing import Any

TRIALS = pathlib.Path(__file__).parent / "trials"
WAIT_S = 90.0


def trial_config(**overrides: Any) -> dict[str, Any]:
    """A single-trial experiment of ``sdk_trial.py`` that keeps every checkpoint."""
    config: dict[str, Any] = {
        "name": "sdk-test",
        "entrypoint": "python3 sdk_trial.py",
        "searcher": {"name": "single", "metric": "val_loss", "max_length": 3},
        "hyperparameters": {"steps": 3, "losses": [0.5, 0.2, 0.9]},
        "checkpoint_storage": {"save_trial_latest": 10, "save_trial_best": 10},
        "max_restarts": 0,
    }
    config.update(overrides)
    return config


def trial_logs(exp: Any) -> str:
    """Every log line of every trial of an SDK ``Experiment``."""
    return "".join(line for t in exp.list_trials() for line in t.iter_logs())


def poll(predicate: Callable[[], Any], what: str, timeout: float = WAIT_S) -> Any:
    """Poll ``predicate`` until truthy (AssertionError naming ``what`` after ``timeout``)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)
