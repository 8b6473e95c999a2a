"""det.pytorch.lightning on a real master: LightningModules run as subprocess trials."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest
import yaml
from e2e.harness import EXAMPLES, MasterAPI

TRIALS = pathlib.Path(__file__).parent / "trials"
EXAMPLE = EXAMPLES / "pytorch" / "lightning"
pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def completed(api: MasterAPI, experiment_id: int) -> list[dict[str, Any]]:
    assert api.wait_experiment(experiment_id, timeout=240) == "STATE_COMPLETED", api.debug(
        experiment_id
    )
    trials = api.trials(experiment_id)
    assert trials and all(t["state"] == "STATE_COMPLETED" for t in trials), api.debug(experiment_id)
    return trials


def test_const_example_runs_to_completed(api: MasterAPI) -> None:
    exp = api.create_experiment(EXAMPLE / "const.yaml", EXAMPLE)
    (trial,) = completed(api, exp)
    training = api.metrics(trial["id"], "training")
    assert api.steps(training) == list(range(10, 201, 10))  # log_every_n_steps=10, max_steps=200
    assert all("train_loss" in api.values(r) for r in training)
    validation = api.metrics(trial["id"], "validation")
    assert api.steps(validation) == [50, 100, 150, 200]
    assert all(api.values(r)["batches"] == r["totalBatches"] for r in validation)
    assert api.values(validation[-1])["val_accuracy"] > 0.8
    checkpoints = [
        c
        for c in api.get(f"/api/v1/trials/{trial['id']}/checkpoints")["checkpoints"]
        if c["state"] == "STATE_COMPLETED"  # the others were garbage-collected at the end
    ]
    assert checkpoints and all("model.ckpt" in c["resources"] for c in checkpoints)
    assert max(c["metadata"]["steps_completed"] for c in checkpoints) == 200
    assert api.experiment(exp)["progress"] == pytest.approx(1.0)


def test_pause_then_activate_resumes_from_the_checkpoint(api: MasterAPI) -> None:
    config = {
        "name": "lightning-pause",
        "entrypoint": "python3 tiny.py",
        "hyperparameters": {"lr": 0.05, "hidden": 8},
        "searcher": {"name": "single", "metric": "val_loss"},
        "max_restarts": 0,
        "data": {"wait_for_pause_at": 4},
    }
    exp = api.create_experiment(config, TRIALS)
    trial_id = api.wait_for(lambda: (api.trials(exp) or [{}])[0].get("id"), what="a trial")
    api.wait_for(
        lambda: any("waiting for a pause at step 4" in line for line in api.logs(trial_id)),
        timeout=120,
        what="the trial to reach step 4",
    )
    api.post(f"/api/v1/experiments/{exp}/pause")
    api.wait_experiment(exp, {"STATE_PAUSED"})
    # the training loader is a plain DataLoader: the trial finishes its epoch, checkpoints, exits
    api.wait_exited(trial_id)
    (paused,) = api.get(f"/api/v1/trials/{trial_id}/checkpoints")["checkpoints"]
    assert paused["metadata"]["steps_completed"] == 8
    assert any("preempted: stopping after epoch 0" in line for line in api.logs(trial_id))

    api.post(f"/api/v1/experiments/{exp}/activate")
    (trial,) = completed(api, exp)
    logs = api.logs(trial_id)
    assert any(f"resuming from det checkpoint {paused['uuid']}" in line for line in logs)
    validation = api.metrics(trial_id, "validation")
    assert api.steps(validation) == [8, 16, 24]  # one per epoch, none repeated after the resume
    assert api.steps(api.metrics(trial_id, "training"))[-1] == 24
    assert trial["totalBatchesProcessed"] == 24


def test_two_process_ddp_through_the_launcher(api: MasterAPI) -> None:
    """``fit()`` under det's torchrun launcher: DDP over gloo with devices/num_nodes from det, the
    sampler sharded (64 samples, batch 8, 2 ranks: 4 steps an epoch), one checkpoint per save."""
    config = {
        "name": "lightning-ddp",
        "entrypoint": "python3 -m determined.launch.torch_distributed python3 tiny.py",
        "hyperparameters": {"lr": 0.05, "hidden": 8},
        "searcher": {"name": "single", "metric": "val_loss"},
        "resources": {"slots_per_trial": 2},
        "max_restarts": 0,
    }
    exp = api.create_experiment(config, TRIALS)
    (trial,) = completed(api, exp)
    logs = api.logs(trial["id"])
    assert any("distributed_backend=gloo" in line for line in logs), logs[-20:]
    assert api.steps(api.metrics(trial["id"], "validation")) == [4, 8, 12]
    assert api.steps(api.metrics(trial["id"], "training"))[-1] == 12
    checkpoints = api.get(f"/api/v1/trials/{trial['id']}/checkpoints")["checkpoints"]
    final = max(checkpoints, key=lambda c: c["metadata"]["steps_completed"])
    assert final["metadata"]["steps_completed"] == 12
    assert "model.ckpt" in final["resources"]


def test_adaptive_example_stops_trials_early(api: MasterAPI) -> None:
    config = yaml.safe_load((EXAMPLE / "adaptive.yaml").read_text())
    # 4 trials give ASHA two rungs, at 50 and 200 batches; with this seed the third trial's
    # hyperparameters are worse at 50 than the first's, whichever order they arrive in
    config["searcher"].update(max_trials=4, max_concurrent_trials=2)
    config["reproducibility"] = {"experiment_seed": 7}
    # 12 batches an epoch: a stopped trial (plain DataLoader) stops at most 12 batches later
    config["hyperparameters"]["batch_size"] = 128
    exp = api.create_experiment(config, EXAMPLE)
    trials = completed(api, exp)
    assert len(trials) == 4
    lengths = {t["id"]: t["totalBatchesProcessed"] for t in trials}
    assert max(lengths.values()) == 200, lengths  # the best trial trains to max_time
    stopped = [t for t in trials if t["totalBatchesProcessed"] < 200]
    assert stopped, lengths
    for trial in stopped:
        logs = api.logs(trial["id"])
        assert any("the searcher stopped this trial" in line for line in logs)
        # ended by the searcher's operations (stop at once) or its stop signal (end of the epoch)
        assert any(
            "the searcher needs no more training" in line or "preempted: stopping after" in line
            for line in logs
        ), "\n".join(logs)
        (validation, *_) = api.metrics(trial["id"], "validation")
        assert validation["totalBatches"] == 50  # judged at the first validation
