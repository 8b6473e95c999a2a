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


@pytest.fixture
def api(master_url: str) -> MasterAPI:
    return MasterAPI(master_url)


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
    checkpoints = api.get(f"/api/v1/trials/{trial['id']}/checkpoints")["checkpoints"]
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
    api.wait_for(lambda: api.trials(exp)[0]["state"] == "STATE_PAUSED", what="trial paused")
    # the training loader is a plain DataLoader: the trial finished its epoch, then checkpointed
    (paused,) = api.get(f"/api/v1/trials/{trial_id}/checkpoints")["checkpoints"]
    assert paused["metadata"]["steps_completed"] == 8

    api.post(f"/api/v1/experiments/{exp}/activate")
    (trial,) = completed(api, exp)
    logs = api.logs(trial_id)
    assert any(f"resuming from det checkpoint {paused['uuid']}" in line for line in logs)
    validation = api.metrics(trial_id, "validation")
    assert api.steps(validation) == [8, 16, 24]  # one per epoch, none repeated after the resume
    assert api.steps(api.metrics(trial_id, "training"))[-1] == 24
    assert trial["totalBatchesProcessed"] == 24


def test_adaptive_example_stops_trials_early(api: MasterAPI) -> None:
    config = yaml.safe_load((EXAMPLE / "adaptive.yaml").read_text())
    config["searcher"].update(max_trials=3, max_concurrent_trials=1, max_time=100)
    config["reproducibility"] = {"experiment_seed": 7}
    exp = api.create_experiment(config, EXAMPLE)
    trials = completed(api, exp)
    assert len(trials) == 3
    lengths = sorted(t["totalBatchesProcessed"] for t in trials)
    assert lengths[-1] == 100  # the best trial trains to max_time
    assert lengths[0] < 100, [(t["id"], t["totalBatchesProcessed"]) for t in trials]
    stopped = next(t for t in trials if t["totalBatchesProcessed"] < 100)
    assert any("checkpoint" in line for line in api.logs(stopped["id"]))
