"""Trials that wait at a gate: three of them running at once until the test opens it (touches
``go`` in the gate directory), for tests that need live allocations or exits queued together."""

from __future__ import annotations

import pathlib
from typing import Any

from master.conftest import Client, wait_for

WAIT_AT_GATE = """
import os, pathlib, time
here = pathlib.Path(os.environ["GATE_DIR"])
(here / ("ready-" + os.environ["DET_TRIAL_ID"])).touch()
while not (here / "go").exists():
    time.sleep(0.02)
"""


def gate_config(name: str, tmp_path: pathlib.Path) -> dict[str, Any]:
    """Three trials of ``WAIT_AT_GATE``, all running at once, their gate in ``tmp_path``."""
    return {
        "name": name,
        "entrypoint": "python3 gate.py",
        "searcher": {"name": "grid", "metric": "x", "max_length": 1, "max_concurrent_trials": 3},
        "hyperparameters": {"n": {"type": "categorical", "vals": [1, 2, 3]}},
        "environment": {"environment_variables": [f"GATE_DIR={tmp_path}"]},
        "max_restarts": 0,
    }


def three_waiting_trials(
    master: Any, tmp_path: pathlib.Path, name: str
) -> tuple[Client, int, list[int]]:
    """An experiment of three trials, each waiting at ``tmp_path/go`` once it started; the
    client, the experiment and its trial ids in order."""
    client = Client(master.url).login()
    exp_id = client.create(gate_config(name, tmp_path), {"gate.py": WAIT_AT_GATE})
    wait_for(lambda: len(list(tmp_path.glob("ready-*"))) == 3, 120, "three trials to start")
    return client, exp_id, sorted(int(t["id"]) for t in client.trials(exp_id))
