"""A master killed with SIGKILL while trials run resumes them when started again."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
from typing import Any

import pytest
from process_tree import alive


@pytest.mark.slow
def test_sigkill_recovery(
    db_url: str, make_master: Any, client_for: Any, config_of: Any, waiter: Any, tmp_path: Any
) -> None:
    marker = tmp_path / "hung"
    first = make_master(db_url, process=True, slots=2)
    client = client_for(first.url)
    config = config_of(
        searcher={"name": "random", "metric": "loss", "max_trials": 2, "max_concurrent_trials": 1},
        hyperparameters={
            "steps": 4,
            "hang_once": str(marker),
            "x": {"type": "int", "minval": 0, "maxval": 1000},
        },
    )
    exp_id = client.create(config)
    waiter(marker.exists, 60, "the first trial to checkpoint and hang")
    (trial,) = client.trials(exp_id)
    pid = int(waiter(lambda: marker.read_text(), 5, "the pid"))
    assert alive(pid)
    first.kill()

    first.restart()  # a new process on the same data dir, database and port
    client = client_for(first.url)
    exp = client.wait_state(exp_id, "STATE_COMPLETED", timeout=60)
    assert exp["progress"] == 1.0
    assert not alive(pid), "the orphaned trial process of the dead master was not reaped"
    trials = client.trials(exp_id)
    assert len(trials) == 2, "the restored searcher did not go on with the search"
    assert all(t["state"] == "STATE_COMPLETED" for t in trials)
    t = client.get(f"/api/v1/trials/{trial['id']}")["trial"]
    assert t["restarts"] == 0
    assert t["trialRunId"] == 2
    reports = [
        m["totalBatches"]
        for chunk in client.stream(
            "/api/v1/trials/metrics/trial_metrics", trialIds=trial["id"], group="training"
        )
        for m in chunk["metrics"]
    ]
    assert reports == [1, 2, 3, 4]
    text = "".join(e["log"] for e in client.stream(f"/api/v1/trials/{trial['id']}/logs"))
    assert "the master restarted; resuming trial" in text
    assert "run 2 starting at step 2" in text


def test_daemon_up_down(tmp_path: pathlib.Path) -> None:
    data = tmp_path / "d"
    env = dict(os.environ)
    up = subprocess.run(
        [
            sys.executable,
            "-m",
            "determined.master",
            "up",
            "--daemon",
            "--port",
            "0",
            "--data-dir",
            str(data),
            "--slots",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=90,
        env=env,
    )
    assert up.returncode == 0, up.stdout + up.stderr
    assert (data / "det-master.pid").exists()
    log = (data / "det-master.log").read_text()
    assert "det-master serving on" in log
    down = subprocess.run(
        [sys.executable, "-m", "determined.master", "down", "--data-dir", str(data)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert down.returncode == 0, down.stdout + down.stderr
    assert not (data / "det-master.pid").exists()


def test_refuses_public_host_with_empty_admin_password(tmp_path: pathlib.Path) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "determined.master",
            "up",
            "--host",
            "0.0.0.0",
            "--port",
            "0",
            "--data-dir",
            str(tmp_path / "d"),
        ],
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert out.returncode != 0
    assert "empty password" in out.stderr
