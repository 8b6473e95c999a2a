"""The det launcher driving a real Hydra app (examples/hydra/launcher_app) as a subprocess:
``python my_app.py -m hydra/launcher=det lr=...`` -> one experiment, results in the multirun dir."""

from __future__ import annotations

import os
import pathlib
import re
import socket
import subprocess
import sys

import pytest
import yaml
from e2e.harness import EXAMPLES, MasterAPI

from determined.master import Master

APP = EXAMPLES / "hydra" / "launcher_app" / "my_app.py"
RESULT = re.compile(r"#(\d+) : (\S+) -> (.+)$")


def run_app(
    tmp_path: pathlib.Path, master: str, *overrides: str
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "HYDRA_FULL_ERROR"}
    command = [
        sys.executable,
        str(APP),
        "-m",
        "hydra/launcher=det",
        f"hydra.launcher.master={master}",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        *overrides,
    ]
    return subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240
    )


def created_id(out: str) -> int:
    found = re.findall(r"Created experiment (\d+) ", out)
    assert len(found) == 1, out
    return int(found[0])


def test_four_point_sweep_is_one_experiment(
    det_master: Master, api: MasterAPI, tmp_path: pathlib.Path
) -> None:
    lrs = ["0.01", "0.05", "0.1", "0.3"]
    before = {e["id"] for e in api.get("/api/v1/experiments")["experiments"]}
    result = run_app(tmp_path, det_master.url, f"lr={','.join(lrs)}")
    assert result.returncode == 0, result.stdout + result.stderr
    experiment_id = created_id(result.stdout)
    after = {e["id"] for e in api.get("/api/v1/experiments")["experiments"]}
    assert after - before == {experiment_id}

    assert api.experiment(experiment_id)["state"] == "STATE_COMPLETED"
    trials = {t["hparams"]["hydra_job"]: t for t in api.trials(experiment_id)}
    assert sorted(trials) == [0, 1, 2, 3]
    returned = {}
    for line in result.stdout.splitlines():
        match = RESULT.search(line)
        if match:
            returned[int(match.group(1))] = (match.group(2), float(match.group(3)))
    assert sorted(returned) == [0, 1, 2, 3], result.stdout

    sweep = tmp_path / "sweep"
    assert (sweep / "multirun.yaml").is_file()
    for num, lr in enumerate(lrs):
        job_dir = sweep / str(num)
        assert yaml.safe_load((job_dir / ".hydra" / "config.yaml").read_text())["lr"] == float(lr)
        assert yaml.safe_load((job_dir / ".hydra" / "overrides.yaml").read_text()) == [f"lr={lr}"]
        assert (job_dir / ".hydra" / "hydra.yaml").is_file()
        assert f"lr={lr}: validation loss" in (job_dir / "my_app.log").read_text()
        trial = trials[num]
        assert trial["state"] == "STATE_COMPLETED"
        assert returned[num] == (f"lr={lr}", pytest.approx(trial["searcherMetricValue"]))
        # the task's own det.core.init() inside the trial reported to the master
        assert api.metrics(trial["id"], "training")
    best = min(trials.values(), key=lambda t: t["searcherMetricValue"])
    assert best["searcherMetricValue"] == min(value for _, value in returned.values())


def test_a_failing_point_fails_the_sweep_with_one_message(
    det_master: Master, api: MasterAPI, tmp_path: pathlib.Path
) -> None:
    result = run_app(tmp_path, det_master.url, "lr=-1,0.1")
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if "hydra job #" in line]
    assert len(errors) == 1, result.stderr
    assert "hydra job #0 raised ValueError: lr must be positive, got -1 (" in errors[0]
    assert str(tmp_path / "sweep" / "0" / "my_app.log") in errors[0]
    assert "Traceback" not in result.stderr
    assert (
        "ValueError: lr must be positive" in (tmp_path / "sweep" / "0" / "my_app.log").read_text()
    )
    trials = {t["hparams"]["hydra_job"]: t for t in api.trials(created_id(result.stdout))}
    assert trials[0]["state"] == "STATE_ERROR" and trials[1]["state"] == "STATE_COMPLETED"


def test_no_wait_returns_once_created(
    det_master: Master, api: MasterAPI, tmp_path: pathlib.Path
) -> None:
    result = run_app(tmp_path, det_master.url, "lr=0.1,0.2", "hydra.launcher.wait=false")
    assert result.returncode == 0, result.stderr
    experiment_id = created_id(result.stdout)
    assert "ended" not in result.stdout
    assert api.wait_experiment(experiment_id) == "STATE_COMPLETED"
    assert len(api.trials(experiment_id)) == 2


def test_master_down_is_one_line(tmp_path: pathlib.Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
    result = run_app(tmp_path, url, "lr=0.1,0.2")
    assert result.returncode == 1
    assert f"no master at {url}" in result.stderr
    assert "Traceback" not in result.stderr
