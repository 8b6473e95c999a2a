"""The optuna searcher on a real det master: a 64-trial TPE+ASHA search, a master SIGKILL mid-search
that changes nothing, and the error an experiment gets where det-plugin-optuna is not installed.

Trials are instant Core API scripts: the loss depends only on the hyperparameters and the length
trained, so two runs of the same seeded search must end with identical trials.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap
from collections.abc import Callable
from typing import Any

import pytest
import requests
import yaml
from e2e.harness import MasterAPI
from master_process import MasterProcess
from process_tree import alive

TRAIN = '''
"""Instant "training": the loss is a function of the hyperparameters and the batches trained."""
import math
import os
import pathlib
import time

import determined as det


def loss(hp, batches):
    return (math.log10(hp["lr"]) + 2.5) ** 2 + (hp["opt"]["momentum"] - 0.8) ** 2 + 1.0 / batches


def hang_once(name):
    """In the crash run, stop here (once) until the test kills the master."""
    marker_dir = os.environ.get("HANG_DIR")
    if not marker_dir:
        return
    marker = pathlib.Path(marker_dir) / name
    if not marker.exists():
        marker.write_text(str(os.getpid()))
        time.sleep(600)


info = det.get_cluster_info()
trial_id, hp = info.trial.trial_id, info.trial.hparams
checkpointing = os.environ.get("CHECKPOINTS") == "1"
with det.core.init() as core_context:
    batches = 0
    if info.latest_checkpoint:
        with core_context.checkpoint.restore_path(info.latest_checkpoint) as path:
            batches = int((path / "batches").read_text())
    for op in core_context.searcher.operations():
        while batches < op.length:
            batches += 1
            if checkpointing:
                with core_context.checkpoint.store_path({"steps_completed": batches}) as (p, _):
                    (p / "batches").write_text(str(batches))
            if trial_id == 5 and batches == 1:
                hang_once("mid-operation")
        core_context.train.report_validation_metrics(
            steps_completed=batches, metrics={"loss": loss(hp, batches), "batches": batches}
        )
        op.report_completed(loss(hp, batches))
    if trial_id == 3:
        hang_once("stopped-trial-winding-down")
'''

HPARAMS = {
    "lr": {"type": "log", "minval": -4, "maxval": 0, "base": 10},
    "opt": {"name": "sgd", "momentum": {"type": "double", "minval": 0.0, "maxval": 1.0}},
    "layers": {"type": "int", "minval": 1, "maxval": 3},
    "act": {"type": "categorical", "vals": ["relu", "tanh"]},
}


def experiment(**searcher: Any) -> dict[str, Any]:
    return {
        "name": "optuna-search",
        "entrypoint": "python3 train.py",
        "hyperparameters": HPARAMS,
        "searcher": {
            "name": "optuna",
            "sampler": "tpe",
            "metric": "loss",
            "time_metric": "batches",
            **searcher,
        },
        "reproducibility": {"experiment_seed": 424242},
        "max_restarts": 0,
    }


@pytest.fixture
def context(tmp_path: pathlib.Path) -> pathlib.Path:
    directory = tmp_path / "context"
    directory.mkdir()
    (directory / "train.py").write_text(TRAIN)
    return directory


@pytest.mark.slow
def test_a_64_trial_tpe_asha_search_runs_to_completion(
    make_master: Callable[..., Any], context: pathlib.Path
) -> None:
    api = MasterAPI(make_master(slots=8).url)
    config = experiment(
        max_trials=64,
        max_time=4,
        max_concurrent_trials=8,
        n_startup_trials=8,
        pruner={"type": "asha", "divisor": 2, "max_rungs": 3},
    )
    exp_id = api.create_experiment(config, context)
    assert api.wait_experiment(exp_id, timeout=400) == "STATE_COMPLETED", api.debug(exp_id)
    trials = api.trials(exp_id)
    assert len(trials) == 64
    assert all(t["state"] == "STATE_COMPLETED" for t in trials)
    lengths = sorted(int(t["totalBatchesProcessed"]) for t in trials)
    assert set(lengths) <= {1, 2, 4}
    assert sum(n < 4 for n in lengths) >= 16, "ASHA stopped (almost) no trial"
    assert len({(t["hparams"]["lr"], t["hparams"]["opt"]["momentum"]) for t in trials}) == 64
    for trial in trials:
        hp = trial["hparams"]
        assert 1e-4 <= hp["lr"] <= 1.0 and hp["opt"]["name"] == "sgd"
        assert hp["layers"] in (1, 2, 3) and hp["act"] in ("relu", "tanh")
    exp = api.experiment(exp_id)
    assert exp["searcherType"] == "optuna" and exp["progress"] == 1.0
    # TPE learned: its last 16 proposals are closer to the optimum (lr 10**-2.5) than the 8 random
    # startup trials (about 1.06 decades off on average for random points of [-4, 0])
    by_id = sorted(trials, key=lambda t: t["id"])

    def error(trial: dict[str, Any]) -> float:
        import math

        return abs(math.log10(trial["hparams"]["lr"]) + 2.5)

    startup, last = by_id[:8], by_id[-16:]
    assert sum(map(error, last)) / 16 < sum(map(error, startup)) / 8


def _outcome(api: MasterAPI, exp_id: int) -> list[dict[str, Any]]:
    keys = ("requestId", "seed", "hparams", "state", "totalBatchesProcessed", "searcherMetricValue")
    out = []
    for trial in api.trials(exp_id):
        row = {key: trial[key] for key in keys}
        row["validations"] = [
            (r["totalBatches"], api.values(r)["loss"])
            for r in api.metrics(trial["id"], "validation")
        ]
        out.append(row)
    return out


@pytest.mark.slow
def test_master_sigkill_mid_search_gives_the_same_trials(
    make_master: Callable[..., Any], context: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    # one trial at a time: the search is deterministic, so both runs must agree on everything
    config = experiment(
        max_trials=6,
        max_time=4,
        max_concurrent_trials=1,
        n_startup_trials=3,
        pruner={"type": "asha", "divisor": 2, "max_rungs": 3},
    )
    env = ["CHECKPOINTS=1"]
    config["environment"] = {"environment_variables": env}
    reference = MasterAPI(make_master(slots=2).url)
    reference_id = reference.create_experiment(config, context)

    hang_dir = tmp_path / "hang"
    hang_dir.mkdir()
    crashed = dict(config, environment={"environment_variables": [*env, f"HANG_DIR={hang_dir}"]})
    master = make_master(process=True, slots=2)
    api = MasterAPI(master.url)
    exp_id = api.create_experiment(crashed, context)
    for marker in ("stopped-trial-winding-down", "mid-operation"):
        path = hang_dir / marker
        api.wait_for(lambda path=path: path.exists() and path.read_text(), 120, marker)
        pid = int(path.read_text())
        master.kill()
        master.restart()  # a new process on the same data dir and port
        api = MasterAPI(master.url)
        api.wait_for(lambda pid=pid: not alive(pid), 30, f"the orphaned trial {pid} to go")

    assert api.wait_experiment(exp_id, timeout=240) == "STATE_COMPLETED", api.debug(exp_id)
    assert reference.wait_experiment(reference_id, timeout=240) == "STATE_COMPLETED"
    expected = _outcome(reference, reference_id)
    assert len(expected) == 6
    assert {row["totalBatchesProcessed"] for row in expected} > {4}, "ASHA stopped no trial"
    assert _outcome(api, exp_id) == expected
    assert sorted(os.listdir(hang_dir)) == ["mid-operation", "stopped-trial-winding-down"]


# ------------------------------------------------------------------------------------ not installed

LAUNCH = """
import runpy, site, sys
site.addsitedir({site!r})
sys.argv[0] = "det-master"
runpy.run_module("determined.master", run_name="__main__", alter_sys=True)
"""


def _site_without_the_plugin(tmp_path: pathlib.Path) -> pathlib.Path:
    """This venv's site-packages as a directory of links, less det-plugin-optuna's files: what
    the environment looks like where the distribution was never installed."""
    real = next(pathlib.Path(p) for p in sys.path if p.endswith("site-packages"))
    site = tmp_path / "site-packages"
    site.mkdir()
    hidden = []
    for entry in real.iterdir():
        if entry.name.startswith(("det_plugin_optuna", "_det_plugin_optuna")):
            hidden.append(entry.name)
            continue
        (site / entry.name).symlink_to(entry)
    assert sorted(hidden) == ["_det_plugin_optuna.pth", "det_plugin_optuna-0.1.0.dist-info"]
    return site


class MasterWithoutPlugin(MasterProcess):
    """``det-master up`` by ``python -S`` over a site directory that lacks det-plugin-optuna."""

    def __init__(self, data_dir: pathlib.Path, site: pathlib.Path) -> None:
        self.launcher = data_dir.parent / "launch_master.py"
        self.launcher.write_text(LAUNCH.format(site=str(site)))
        super().__init__(data_dir, slots=1)

    def _launch(self, port: int) -> None:
        self._argv[:3] = [sys.executable, "-S", str(self.launcher)]
        super()._launch(port)


def test_without_det_plugin_optuna_the_experiment_is_refused_naming_it(
    tmp_path: pathlib.Path,
) -> None:
    site = _site_without_the_plugin(tmp_path)
    probe = textwrap.dedent(
        f"""
        import importlib.metadata, importlib.util, site
        site.addsitedir({str(site)!r})
        import determined.master
        from determined.core import plugins
        print(importlib.util.find_spec("determined.optuna") is None)
        try:
            importlib.metadata.distribution("det-plugin-optuna")
        except importlib.metadata.PackageNotFoundError:
            print("no distribution")
        try:
            plugins.search_method({{"searcher": {{"name": "optuna"}}}})
        except ValueError as exc:
            print(exc)
        """
    )
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "DET_DISABLE_PLUGIN_AUTOLOAD")
    }
    out = subprocess.run(
        [sys.executable, "-S", "-c", probe], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[:2] == ["True", "no distribution"], out.stdout
    assert "pip install det-plugin-optuna" in lines[2]

    master = MasterWithoutPlugin(tmp_path / "master", site)
    try:
        api = MasterAPI(master.url)
        config = experiment(max_trials=2, max_time=2)
        config["checkpoint_storage"] = {"type": "shared_fs", "host_path": str(tmp_path / "ckpt")}
        response = requests.post(
            f"{master.url}/api/v1/experiments",
            json={"config": yaml.safe_dump(config)},
            headers=api.session.headers(),
            timeout=60,
        )
        assert response.status_code == 400, response.text
        message = response.json()["error"]["error"]
        assert "searcher.name" in message and "pip install det-plugin-optuna" in message
    finally:
        master.stop()
