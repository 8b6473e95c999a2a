"""A seeded search survives master crashes: SIGKILL mid-search, restart, same trials as without.

The crashed search runs on ``python -m determined.master up`` subprocesses sharing one data dir;
the reference runs the same experiment (same seed) on an in-process master, uninterrupted, at the
same time. ASHA with one bracket and one trial at a time decides deterministically, so both must
end with the same trials: request ids, seeds, hyperparameters, states, batches and metrics.

The master is killed twice, at two different points of the trial lifecycle: once while a trial the
searcher stopped is winding down (its loop ended, the process has not exited), once while a trial
is training in the middle of an operation.
"""

from __future__ import annotations

import os
import pathlib
import re
from collections.abc import Callable
from typing import Any

import pytest
from e2e.harness import MasterAPI
from process_tree import alive

from determined.master import Master

TRAIN = '''
"""Deterministic "training": the loss depends only on the hyperparameter and the step."""
import os
import pathlib
import time

import determined as det


def loss(x, batches):
    return (x - 0.3) ** 2 + 1.0 / batches


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
trial_id, x = info.trial.trial_id, info.trial.hparams["x"]
with det.core.init() as core_context:
    batches = 0
    if info.latest_checkpoint:
        with core_context.checkpoint.restore_path(info.latest_checkpoint) as path:
            batches = int((path / "batches").read_text())
    print(f"trial {trial_id} run {info.trial._trial_run_id} starts at batch {batches}", flush=True)
    for op in core_context.searcher.operations():
        while batches < op.length:
            batches += 1
            core_context.train.report_training_metrics(
                steps_completed=batches, metrics={"loss": loss(x, batches)}
            )
            with core_context.checkpoint.store_path({"steps_completed": batches}) as (path, _):
                (path / "batches").write_text(str(batches))
            if trial_id == 4 and batches == 1:
                hang_once("mid-operation")
        core_context.train.report_validation_metrics(
            steps_completed=batches, metrics={"loss": loss(x, batches), "batches": batches}
        )
        op.report_completed(loss(x, batches))
    print(f"trial {trial_id} done at batch {batches}", flush=True)
    if trial_id == 2:
        hang_once("stopped-trial-winding-down")
'''

CONFIG: dict[str, Any] = {
    "name": "asha-restart",
    "entrypoint": "python3 train.py",
    "hyperparameters": {"x": {"type": "double", "minval": 0.0, "maxval": 1.0}},
    "searcher": {
        "name": "adaptive_asha",
        "metric": "loss",
        "time_metric": "batches",
        "max_time": 8,
        "max_trials": 6,
        "mode": "aggressive",
        "divisor": 2,
        "max_rungs": 3,
        "max_concurrent_trials": 1,
    },
    "reproducibility": {"experiment_seed": 20240601},
    "max_restarts": 0,
}


def _hung_pid(path: pathlib.Path, api: MasterAPI) -> int:
    """The pid a hung trial wrote into ``path``, once it did."""
    api.wait_for(lambda: path.exists() and path.read_text(), 120, f"{path.name} to appear")
    return int(path.read_text())


def _outcome(api: MasterAPI, exp_id: int) -> list[dict[str, Any]]:
    keys = ("requestId", "seed", "hparams", "state", "totalBatchesProcessed")
    out = []
    for trial in api.trials(exp_id):
        row = {key: trial[key] for key in keys}
        row["searcherMetricValue"] = trial["searcherMetricValue"]
        row["validations"] = [
            (r["totalBatches"], api.values(r)["loss"])
            for r in api.metrics(trial["id"], "validation")
        ]
        out.append(row)
    return out


@pytest.mark.slow
def test_search_after_master_crashes_matches_uninterrupted_run(
    master_factory: Callable[..., Master],
    tmp_path: pathlib.Path,
) -> None:
    context = tmp_path / "context"
    context.mkdir()
    (context / "train.py").write_text(TRAIN)
    hang_dir = tmp_path / "hang"
    hang_dir.mkdir()

    reference = MasterAPI(master_factory().url)
    reference_id = reference.create_experiment(CONFIG, context)

    crashed_config = dict(CONFIG, environment={"environment_variables": [f"HANG_DIR={hang_dir}"]})
    master = master_factory(process=True, slots=4)  # a subprocess: SIGKILL must not hit pytest
    api = MasterAPI(master.url)
    exp_id = api.create_experiment(crashed_config, context)
    for marker in ("stopped-trial-winding-down", "mid-operation"):
        pid = _hung_pid(hang_dir / marker, api)
        master.kill()
        master.restart()  # a new process on the same data dir and port
        api = MasterAPI(master.url)
        api.wait_for(lambda pid=pid: not alive(pid), 30, f"the orphaned trial {pid} to be reaped")

    assert api.wait_experiment(exp_id, timeout=240) == "STATE_COMPLETED", api.debug(exp_id)
    assert reference.wait_experiment(reference_id, timeout=240) == "STATE_COMPLETED"
    expected = _outcome(reference, reference_id)
    assert len(expected) == CONFIG["searcher"]["max_trials"]
    assert {row["totalBatchesProcessed"] for row in expected} > {8}, "ASHA stopped no trial"
    assert _outcome(api, exp_id) == expected

    # the two crashes really happened where intended
    trials = {t["id"]: t for t in api.trials(exp_id)}
    logs = {trial_id: "".join(api.logs(trial_id)) for trial_id in trials}
    # (trial 2's last lines before the crash may die with the master that was reading its stdout)
    assert "trial 2 run 2" not in logs[2]
    # trial 4 started from scratch, then resumed at batch 1 after the mid-operation crash. Its run
    # numbers depend on whether it was already queued at the first crash (a restart counts a new
    # run even for an allocation that never launched), and the first run's line may die with the
    # master that read it, so compare the batches only.
    starts = re.findall(r"trial 4 run \d+ starts at batch (\d+)", logs[4])
    assert starts[-1:] == ["1"] and set(starts[:-1]) <= {"0"}, logs[4]
    assert trials[4]["restarts"] == 0  # a master crash does not count against max_restarts
    assert sorted(os.listdir(hang_dir)) == ["mid-operation", "stopped-trial-winding-down"]
