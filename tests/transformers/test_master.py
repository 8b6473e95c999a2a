"""DetCallback on a real det master (SQLite, loopback port, subprocess trials): a Hugging Face
Trainer experiment trains and checkpoints, is paused inside an epoch and resumes to exactly the
numbers of a straight run; an adaptive ASHA search stops trials at a rung."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest
from e2e.harness import MasterAPI

HERE = pathlib.Path(__file__).resolve().parent
CONTEXT = HERE / "context"
HOLD_LINE = "holding for a pause after step"  # printed by context/train.py
STOP_LINE = "the searcher needs no more training from this trial"  # logged by DetCallback
# every trial process imports torch and transformers: slow on a loaded CI machine
pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(600)]


def _config(name: str, searcher: dict[str, Any] | None = None, **hparams: Any) -> dict[str, Any]:
    return {
        "name": name,
        "entrypoint": "python3 train.py",
        "hyperparameters": {"lr": 0.01, "max_steps": 16, **hparams},
        "searcher": searcher
        or {"name": "single", "metric": "eval_loss", "smaller_is_better": True},
        "reproducibility": {"experiment_seed": 3},
        "resources": {"slots_per_trial": 1},
        "max_restarts": 0,
    }


def _series(api: MasterAPI, trial_id: int, group: str) -> list[tuple[int, dict[str, Any]]]:
    return [(int(r["totalBatches"]), api.values(r)) for r in api.metrics(trial_id, group)]


def _checkpoints(api: MasterAPI, trial_id: int) -> list[dict[str, Any]]:
    return list(api.get(f"/api/v1/trials/{trial_id}/checkpoints")["checkpoints"])


def _completed(api: MasterAPI, experiment_id: int, timeout: float = 240) -> list[dict[str, Any]]:
    state = api.wait_experiment(experiment_id, timeout=timeout)
    assert state == "STATE_COMPLETED", api.debug(experiment_id)
    trials = api.trials(experiment_id)
    assert trials and all(t["state"] == "STATE_COMPLETED" for t in trials), api.debug(experiment_id)
    return trials


def test_trains_checkpoints_pauses_mid_epoch_and_resumes_exactly(api: MasterAPI) -> None:
    straight = api.create_experiment(_config("hf-straight"), CONTEXT)
    paused = api.create_experiment(_config("hf-paused", hold_at=6), CONTEXT)
    trial_id = api.wait_for(lambda: (api.trials(paused) or [{}])[0].get("id"), 120, "a trial")
    api.wait_for(
        lambda: any(HOLD_LINE in line for line in api.logs(trial_id)), 240, "the hold at step 6"
    )
    api.post(f"/api/v1/experiments/{paused}/pause")
    api.wait_experiment(paused, {"STATE_PAUSED"}, timeout=120)
    api.wait_for(lambda: api.trials(paused)[0]["state"] == "STATE_PAUSED", 120, "trial paused")
    api.wait_exited(trial_id)  # the pause checkpoint is reported before the process exits
    # step 6 is inside the first epoch (8 steps): the checkpoint the Trainer saved when preempted
    assert sorted(c["metadata"]["steps_completed"] for c in _checkpoints(api, trial_id)) == [4, 6]
    api.post(f"/api/v1/experiments/{paused}/activate")

    (reference,) = _completed(api, straight)
    (resumed,) = _completed(api, paused)
    assert resumed["id"] == trial_id and resumed["totalBatchesProcessed"] == 16
    assert any("downloaded to" in line and "checkpoint-6" in line for line in api.logs(trial_id))

    ref_training = _series(api, reference["id"], "training")
    training = _series(api, trial_id, "training")
    assert [step for step, _ in training] == [2, 4, 6, 8, 10, 12, 14, 16]
    assert [m["loss"] for _, m in training] == [m["loss"] for _, m in ref_training]
    ref_validation = _series(api, reference["id"], "validation")
    validation = _series(api, trial_id, "validation")
    assert [step for step, _ in validation] == [4, 8, 12, 16]
    assert [m["eval_loss"] for _, m in validation] == [m["eval_loss"] for _, m in ref_validation]
    assert [m["batches"] for _, m in validation] == [4, 8, 12, 16]
    assert [m["epochs"] for _, m in validation] == [0.5, 1.0, 1.5, 2.0]

    checkpoints = _checkpoints(api, reference["id"])
    assert sorted(c["metadata"]["steps_completed"] for c in checkpoints) == [4, 8, 12, 16]
    assert all(c["metadata"]["trial_id"] == reference["id"] for c in checkpoints)
    # checkpoint GC (save_trial_latest/best: 1) emptied the older ones; the last one holds only
    # the Trainer's checkpoint-16 directory, with the user data
    latest = max(checkpoints, key=lambda c: c["metadata"]["steps_completed"])
    resources = set(latest["resources"])
    assert {"checkpoint-16/model.safetensors", "checkpoint-16/my_data.json"} <= resources
    assert {r.split("/")[0] for r in resources} == {"checkpoint-16", "metadata.json"}
    assert reference["searcherMetricValue"] == validation[-1][1]["eval_loss"]


def test_adaptive_asha_stops_trials_at_a_rung(api: MasterAPI) -> None:
    searcher = {
        "name": "adaptive_asha",
        "metric": "eval_loss",
        "smaller_is_better": True,
        "time_metric": "batches",
        "max_time": 16,
        "max_trials": 4,
        "mode": "standard",
        "divisor": 2,
        "max_rungs": 3,
        # one at a time: the order in which trials reach a rung, and so the verdicts, is fixed
        "max_concurrent_trials": 1,
    }
    config = _config("hf-asha", searcher)
    config["hyperparameters"]["lr"] = {"type": "log", "minval": -3.0, "maxval": -0.5, "base": 10}
    experiment = api.create_experiment(config, CONTEXT)
    trials = _completed(api, experiment, timeout=400)
    assert len(trials) == 4
    batches = {t["id"]: int(t["totalBatchesProcessed"]) for t in trials}
    assert set(batches.values()) <= {4, 8, 16}, batches
    stopped = [t for t in trials if batches[t["id"]] < 16]
    assert stopped, f"ASHA stopped no trial early: {batches}"
    for trial in stopped:
        # stopped at the rung it was judged at, with a checkpoint there
        assert any(STOP_LINE in line for line in api.logs(trial["id"])), api.debug(experiment)
        steps = [c["metadata"]["steps_completed"] for c in _checkpoints(api, trial["id"])]
        assert max(steps) == batches[trial["id"]]
        validation = _series(api, trial["id"], "validation")
        assert validation[-1][0] == batches[trial["id"]]
