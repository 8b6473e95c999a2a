"""PyTorchTrial experiments on a real det master: the legacy ``model_def:Trial`` entrypoint on one
slot and on two (DDP through the launcher), exact pause/resume, and the digits examples."""

from __future__ import annotations

import pathlib
import shutil
from typing import Any

import onevar
import pytest
from e2e.harness import EXAMPLES, MasterAPI

HERE = pathlib.Path(__file__).resolve().parent
pytestmark = [pytest.mark.e2e, pytest.mark.slow]


# ``api``: the root conftest's client of a fresh SQLite master with 4 slots.


@pytest.fixture
def legacy_dir(tmp_path: pathlib.Path) -> pathlib.Path:
    context = tmp_path / "context"
    context.mkdir()
    shutil.copy(HERE / "onevar.py", context)
    shutil.copy(HERE / "legacy" / "model_def.py", context)
    return context


def _legacy_config(name: str, slots: int = 1, **hparams: Any) -> dict[str, Any]:
    return {
        "name": name,
        "entrypoint": "model_def:OneVarTrial",
        "hyperparameters": {
            "global_batch_size": 4,
            "lr": 0.02,
            "dataset_len": 40,
            "val_len": 10,
            "shuffle": True,
            "noise": 0.1,
            "no_train_reducer": True,
            **hparams,
        },
        "searcher": {
            "name": "single",
            "metric": "val_loss",
            "smaller_is_better": True,
            "max_length": {"batches": 60},
        },
        "min_validation_period": {"batches": 20},
        "min_checkpoint_period": {"batches": 20},
        "scheduling_unit": 5,
        "reproducibility": {"experiment_seed": 11},
        "resources": {"slots_per_trial": slots},
        "max_restarts": 0,
    }


def _completed_trial(api: MasterAPI, experiment_id: int, timeout: float = 240) -> dict[str, Any]:
    state = api.wait_experiment(experiment_id, timeout=timeout)
    assert state == "STATE_COMPLETED", api.debug(experiment_id)
    (trial,) = api.trials(experiment_id)
    return trial


def _series(api: MasterAPI, trial_id: int, group: str) -> list[tuple[int, dict[str, Any]]]:
    return [(int(r["totalBatches"]), api.values(r)) for r in api.metrics(trial_id, group)]


def test_legacy_entrypoint_and_exact_pause_resume(api: MasterAPI, legacy_dir: pathlib.Path) -> None:
    straight = api.create_experiment(_legacy_config("straight"), legacy_dir)
    paused = api.create_experiment(_legacy_config("paused", slow=0.05), legacy_dir)
    # pause the second one mid-run, wait for its trial to stop, and continue it
    trial_id = api.wait_for(lambda: (api.trials(paused) or [{}])[0].get("id"), what="a trial")
    api.wait_for(lambda: len(api.metrics(trial_id, "training")) >= 2, 120, "two reports")
    api.post(f"/api/v1/experiments/{paused}/pause")
    api.wait_experiment(paused, {"STATE_PAUSED"}, timeout=120)
    api.wait_for(lambda: api.trials(paused)[0]["state"] == "STATE_PAUSED", 120, "trial paused")
    api.wait_exited(trial_id)  # then the pause checkpoint is stored
    stopped_at = max(c["metadata"]["steps_completed"] for c in _checkpoints(api, trial_id))
    assert 0 < stopped_at < 60, "the pause should land mid-run"
    api.post(f"/api/v1/experiments/{paused}/activate")

    reference = _completed_trial(api, straight)
    resumed = _completed_trial(api, paused)
    training = _series(api, reference["id"], "training")
    assert [step for step, _ in training] == list(range(5, 61, 5))
    validation = _series(api, reference["id"], "validation")
    assert [step for step, _ in validation] == [20, 40, 60]
    assert validation[-1][1]["fn_count"] == 3  # the validation set: batches of 4, 4 and 2
    # the legacy config mapped onto the Trainer: 60 batches, SGD math on every step
    weights = onevar.expected_weights(0.02, 60)
    assert training[0][1]["w_after"] != weights[4]  # noisy labels: not the noiseless math ...
    assert training[-1][1]["batches"] == 60 and reference["totalBatchesProcessed"] == 60
    # ... but the paused-and-continued trial reports exactly the same numbers
    assert _series(api, resumed["id"], "training") == training
    assert _series(api, resumed["id"], "validation") == validation
    assert any("restoring trial from checkpoint" in line for line in api.logs(resumed["id"]))


def _checkpoints(api: MasterAPI, trial_id: int) -> list[dict[str, Any]]:
    return list(api.get(f"/api/v1/trials/{trial_id}/checkpoints")["checkpoints"])


def test_legacy_entrypoint_on_two_slots(api: MasterAPI, legacy_dir: pathlib.Path) -> None:
    config = _legacy_config("ddp", slots=2, noise=0, shuffle=False)
    trial = _completed_trial(api, api.create_experiment(config, legacy_dir))
    training = _series(api, trial["id"], "training")
    assert [step for step, _ in training] == list(range(5, 61, 5))  # reported once, by the chief
    weights = onevar.expected_weights(0.02, 60)  # reports average their 5 batches
    averages = [sum(weights[i : i + 5]) / 5 for i in range(0, 60, 5)]
    assert [m["w_after"] for _, m in training] == pytest.approx(averages, abs=1e-5)
    (_, first), *_ = _series(api, trial["id"], "validation")
    assert first["fn_count"] == 6 and first["fn_sum"] == 10  # 10 records over 2 ranks
    assert any(
        "running under determined.launch.torch_distributed" in line
        for line in api.logs(trial["id"])
    )


def _example(api: MasterAPI, config: str, overrides: dict[str, Any] | None = None) -> int:
    return api.create_experiment(
        EXAMPLES / "pytorch" / config, EXAMPLES / "pytorch", overrides=overrides
    )


def test_digits_const_and_distributed_examples(api: MasterAPI) -> None:
    short = "--batches 60 --validate-every 30"
    const = _example(api, "const.yaml", {"entrypoint": f"python3 train.py {short}"})
    distributed = _example(
        api,
        "distributed.yaml",
        {"entrypoint": "python3 -m determined.launch.torch_distributed python3 train.py " + short},
    )
    for experiment in (const, distributed):
        trial = _completed_trial(api, experiment)
        validation = _series(api, trial["id"], "validation")
        assert [step for step, _ in validation] == [30, 60]
        assert validation[-1][1]["accuracy"] > 0.5
        assert _checkpoints(api, trial["id"])


def test_digits_adaptive_example_stops_trials_early(api: MasterAPI) -> None:
    experiment = _example(
        api,
        "adaptive.yaml",
        {
            "entrypoint": "python3 train.py --batches 64 --validate-every 4",
            "searcher": {
                "name": "adaptive_asha",
                "metric": "validation_loss",
                "smaller_is_better": True,
                "time_metric": "batches",
                "max_time": 64,
                "max_trials": 4,
                "max_rungs": 3,
                "divisor": 4,
                "mode": "aggressive",
                "max_concurrent_trials": 2,
            },
            # fixed hyperparameter draws: unseeded, a CI run drew four trials that all earned
            # their promotions, so no early stop could be seen
            "reproducibility": {"experiment_seed": 3},
        },
    )
    state = api.wait_experiment(experiment, timeout=300)
    assert state == "STATE_COMPLETED", api.debug(experiment)
    trials = api.trials(experiment)
    assert len(trials) == 4
    lengths = [int(t["totalBatchesProcessed"]) for t in trials]
    assert max(lengths) == 64, lengths
    print("batches trained per trial:", lengths)
    assert min(lengths) < 64, f"no trial was stopped early: {lengths}"
