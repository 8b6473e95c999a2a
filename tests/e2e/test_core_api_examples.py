"""Every stage of examples/core_api runs as an experiment on a real master, to COMPLETED."""

from __future__ import annotations

import pytest
from e2e.harness import EXAMPLES, MasterAPI

CORE_API = EXAMPLES / "core_api"
pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _completed_trials(api: MasterAPI, experiment_id: int) -> list[dict]:
    state = api.wait_experiment(experiment_id, timeout=240)
    assert state == "STATE_COMPLETED", api.debug(experiment_id)
    trials = api.trials(experiment_id)
    assert trials and all(t["state"] == "STATE_COMPLETED" for t in trials), api.debug(experiment_id)
    return trials


def test_stage0_start(api: MasterAPI) -> None:
    exp = api.create_experiment(CORE_API / "0_start.yaml", CORE_API)
    (trial,) = _completed_trials(api, exp)
    assert any(
        "hello from the Core API, running on a det cluster" in line
        for line in api.logs(trial["id"])
    )


def test_stage1_metrics(api: MasterAPI) -> None:
    exp = api.create_experiment(CORE_API / "1_metrics.yaml", CORE_API)
    (trial,) = _completed_trials(api, exp)
    training = api.metrics(trial["id"], "training")
    assert api.steps(training) == list(range(10, 101, 10))
    assert all("loss" in api.values(m) for m in training)
    (validation,) = api.metrics(trial["id"], "validation")
    assert validation["totalBatches"] == 100 and "validation_loss" in api.values(validation)


def test_stage2_checkpoints(api: MasterAPI) -> None:
    exp = api.create_experiment(CORE_API / "2_checkpoints.yaml", CORE_API)
    (trial,) = _completed_trials(api, exp)
    checkpoints = api.get(f"/api/v1/trials/{trial['id']}/checkpoints")["checkpoints"]
    steps = sorted(c["metadata"]["steps_completed"] for c in checkpoints)
    # save_trial_latest=1 / save_trial_best=1 garbage-collect older ones at the end
    assert steps and steps[-1] == 100
    latest = max(checkpoints, key=lambda c: c["metadata"]["steps_completed"])
    assert "model.json" in latest["resources"] and "metadata.json" in latest["resources"]


def test_stage3_hpsearch(api: MasterAPI) -> None:
    exp = api.create_experiment(CORE_API / "3_hpsearch.yaml", CORE_API)
    trials = _completed_trials(api, exp)
    assert len(trials) == 8
    assert len({str(t["hparams"]) for t in trials}) == 8
    best = api.get(f"/api/v1/experiments/{exp}/searcher/best_searcher_validation_metric")["metric"]
    assert best < 1.0
    assert api.experiment(exp)["progress"] == pytest.approx(1.0)


def test_stage4_distributed_8_slots(api: MasterAPI) -> None:
    exp = api.create_experiment(CORE_API / "4_distributed.yaml", CORE_API)
    (trial,) = _completed_trials(api, exp)
    training = api.metrics(trial["id"], "training")
    assert training and all(api.values(m)["ranks"] == 8 for m in training)
    ranks = {entry.get("rankId") for entry in api.log_entries(trial["id"])}
    assert set(range(8)) <= ranks
