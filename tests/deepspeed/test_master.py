"""DeepSpeedTrial experiments on a real det master, on CPU: the legacy ``model_def:Trial``
entrypoint with ZeRO 0, 2 and 3 on one slot, and 2 and 3 on two (through
determined.launch.deepspeed), paused mid-run and continued to exactly the numbers of an
uninterrupted run. ZeRO 0 on two ranks is left out: its checkpoint is the one-slot layout once per
rank, and the launcher path is the one stages 2 and 3 take (each stage is three more DeepSpeed
processes to start; on CI's two cores the whole test took about three minutes)."""

from __future__ import annotations

import pathlib
import shutil
from typing import Any

import lintrial
import pytest
from e2e.harness import MasterAPI

from determined import pytorch
from determined.pytorch import deepspeed as det_ds

HERE = pathlib.Path(__file__).resolve().parent
pytestmark = [pytest.mark.e2e, pytest.mark.slow]
STAGES = [0, 2, 3]
SHARDED_STAGES = [2, 3]


@pytest.fixture
def api(make_master: Any) -> MasterAPI:
    """A master with a slot for every rank of every trial of an experiment (three one-slot
    trials, two two-slot ones): they must all run at once to reach the point where the test
    pauses them."""
    return make_master(slots=4).api()  # type: ignore[no-any-return]


@pytest.fixture
def context_dir(tmp_path: pathlib.Path) -> pathlib.Path:
    context = tmp_path / "context"
    context.mkdir()
    shutil.copy(HERE / "lintrial.py", context)
    shutil.copy(HERE / "context" / "model_def.py", context)
    return context


def _config(name: str, slots: int, stages: list[int], **hparams: Any) -> dict[str, Any]:
    return {
        "name": name,
        "entrypoint": "model_def:LinTrial",
        "hyperparameters": {
            **lintrial.HPARAMS,
            "stage": {"type": "categorical", "vals": stages},
            **hparams,
        },
        "searcher": {
            "name": "grid",
            "metric": "val_loss",
            "smaller_is_better": True,
            "max_length": {"batches": 12},
            "max_concurrent_trials": 0,
        },
        "min_validation_period": {"batches": 4},
        "min_checkpoint_period": {"batches": 4},
        "scheduling_unit": 2,
        "reproducibility": {"experiment_seed": 5},
        "resources": {"slots_per_trial": slots},
        "max_restarts": 0,
    }


def _series(api: MasterAPI, trial_id: int, group: str) -> list[tuple[int, dict[str, Any]]]:
    return [(int(r["totalBatches"]), api.values(r)) for r in api.metrics(trial_id, group)]


def _checkpoints(api: MasterAPI, trial_id: int) -> list[dict[str, Any]]:
    return list(api.get(f"/api/v1/trials/{trial_id}/checkpoints")["checkpoints"])


def _pause_at_the_wait(
    api: MasterAPI, experiment: int, stages: list[int]
) -> dict[int, dict[str, Any]]:
    """Pause once every trial holds at batch 6 (it says so in its log and waits there until
    paused; its batch-4 report comes before it checks for a pause at that step, so a pause sent
    when that report arrives could still stop it at step 4), continue, and return the finished
    trials by ZeRO stage."""
    api.wait_for(lambda: len(api.trials(experiment)) == len(stages), 120, "every trial")
    for trial in api.trials(experiment):

        def holding(trial_id: int = trial["id"]) -> bool:
            return any("holding for a pause after batch" in line for line in api.logs(trial_id))

        api.wait_for(holding, 240, f"trial {trial['id']} holding at batch 6")
    api.post(f"/api/v1/experiments/{experiment}/pause")
    api.wait_experiment(experiment, {"STATE_PAUSED"}, timeout=120)
    for trial in api.trials(experiment):

        def paused(trial_id: int = trial["id"]) -> bool:
            states = {t["id"]: t["state"] for t in api.trials(experiment)}
            return states[trial_id] == "STATE_PAUSED"

        api.wait_for(paused, 120, f"trial {trial['id']} paused")
        api.wait_exited(trial["id"])  # the pause checkpoint comes from the process after that
        steps = [c["metadata"]["steps_completed"] for c in _checkpoints(api, trial["id"])]
        assert 4 < max(steps) < 12, steps  # stopped mid-run, past the hold at batch 6
    api.post(f"/api/v1/experiments/{experiment}/activate")
    state = api.wait_experiment(experiment, timeout=280)
    assert state == "STATE_COMPLETED", api.debug(experiment)
    return {int(t["hparams"]["stage"]): t for t in api.trials(experiment)}


def _reference(hparams: dict[str, Any], seed: int, storage: pathlib.Path) -> Any:
    """The same trial run straight through in this process, seeded like the master's trial."""
    with det_ds.init(
        hparams={k: v for k, v in hparams.items() if k != "wait_for_pause_at"},
        exp_conf={"reproducibility": {"experiment_seed": seed}},
        checkpoint_storage=str(storage),
        enable_tensorboard_logging=False,
    ) as context:
        trial = lintrial.LinTrial(context)
        det_ds.Trainer(trial, context).fit(
            max_length=pytorch.Batch(12),
            validation_period=pytorch.Batch(4),
            checkpoint_period=pytorch.Batch(4),
            reporting_period=pytorch.Batch(2),
            checkpoint_policy="none",
        )
    return trial


def test_one_slot_zero_0_2_3_pause_and_resume_exactly(
    api: MasterAPI, context_dir: pathlib.Path, off_cluster: pathlib.Path
) -> None:
    experiment = api.create_experiment(_config("one", 1, STAGES, wait_for_pause_at=5), context_dir)
    trials = _pause_at_the_wait(api, experiment, STAGES)
    for stage in STAGES:
        trial = trials[stage]
        assert trial["totalBatchesProcessed"] == 12
        training = _series(api, trial["id"], "training")
        validation = _series(api, trial["id"], "validation")
        assert [step for step, _ in training] == list(range(2, 13, 2))
        assert [step for step, _ in validation] == [4, 8, 12]
        assert any("restoring trial from checkpoint" in line for line in api.logs(trial["id"]))
        # exactly the numbers of the same trial run straight through, off-cluster
        reference = _reference(trial["hparams"], int(trial["seed"]), off_cluster / str(stage))
        assert [m["loss"] for _, m in training] == [w["loss"] for w in reference.recorder.workloads]
        assert [m["val_loss"] for _, m in validation] == [
            v["val_loss"] for v in reference.recorder.validations
        ]
        assert [m["batch_idx"] for _, m in training] == [0.5, 2.5, 4.5, 6.5, 8.5, 10.5]


def test_two_slots_zero_2_3_through_the_launcher(
    api: MasterAPI, context_dir: pathlib.Path, two_rank_runs: list[dict[str, Any]]
) -> None:
    """Two ranks per trial: ``launch.trial`` re-runs itself under determined.launch.deepspeed. The
    paused-and-continued trials report exactly what two ranks reported off-cluster straight
    through (conftest's ``two_rank_runs``: same hyperparameters, seed and periods)."""
    config = _config("two", 2, SHARDED_STAGES, wait_for_pause_at=5)
    experiment = api.create_experiment(config, context_dir)
    trials = _pause_at_the_wait(api, experiment, SHARDED_STAGES)
    chief = two_rank_runs[0]
    for stage in SHARDED_STAGES:
        trial = trials[stage]
        reference = chief[str(stage)]["straight"]
        training = _series(api, trial["id"], "training")
        validation = _series(api, trial["id"], "validation")
        assert [step for step, _ in training] == list(range(2, 13, 2))
        assert [m["loss"] for _, m in training] == [w["loss"] for w in reference["workloads"]]
        assert [m["val_loss"] for _, m in validation] == [
            v["val_loss"] for v in reference["validations"]
        ]
        assert [m["batch_idx"] for _, m in training] == [0.5, 2.5, 4.5, 6.5, 8.5, 10.5]
        assert any("restoring trial from checkpoint" in line for line in api.logs(trial["id"]))
        ranks = {entry.get("rankId") for entry in api.log_entries(trial["id"])}
        assert {0, 1} <= ranks
