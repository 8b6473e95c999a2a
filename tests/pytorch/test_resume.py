"""Exact resume off-cluster, and loading checkpoints: det's own and upstream Determined's format."""

from __future__ import annotations

import io
import json
import pathlib
import pickle
import random
from collections.abc import Callable
from typing import Any

import numpy as np
import onevar
import pytest
import torch

from determined import pytorch
from determined.pytorch import _checkpoint

Train = Callable[..., Any]

HPARAMS = {"lr": 0.05, "dataset_len": 40, "shuffle": True, "noise": 0.1}
FIT = {
    "max_length": pytorch.Batch(24),
    "reporting_period": pytorch.Batch(5),
    "validation_period": pytorch.Batch(10),
    "checkpoint_period": pytorch.Batch(10),
    "checkpoint_policy": "none",
}
SEEDED = {"reproducibility": {"experiment_seed": 7}}


def _observed(trial: Any) -> dict[str, Any]:
    return {
        "batches": trial.counter.batch_metrics,
        "workloads": trial.counter.workload_metrics,
        "validations": trial.counter.validation_metrics,
    }


@pytest.mark.parametrize(
    ("stop_at", "how", "train_reducer", "stopped_at"),
    [
        (13, "request", False, 13),  # between two reports: pending metrics go into the checkpoint
        (17, "sigterm", False, 17),
        (13, "request", True, 15),  # a training MetricReducer's state cannot be saved: next report
        (10, "request", True, 10),
    ],
)
def test_preempted_and_resumed_run_matches_an_uninterrupted_one(
    train: Train, stop_at: int, how: str, train_reducer: bool, stopped_at: int
) -> None:
    hparams = {**HPARAMS, "no_train_reducer": not train_reducer}
    straight = train(onevar.OneVarTrial, hparams, exp_conf=SEEDED, **FIT)
    # the same run, stopped after batch `stop_at`: it checkpoints and returns ...
    first = train(
        onevar.OneVarTrial, {**hparams, "stop_at": stop_at, "stop_how": how}, exp_conf=SEEDED, **FIT
    )
    latest = first.counter.uuids[-1]
    saved = torch.load(first.storage / latest / "state_dict.pth", weights_only=True)
    assert saved["det_trial_state"]["batches_trained"] == stopped_at
    # ... and a fresh process resumes it (no seed this time: everything comes from the checkpoint)
    second = train(onevar.OneVarTrial, hparams, latest_checkpoint=latest, **FIT)
    assert second.counter.startup == [(stopped_at, latest)]
    assert second.counter.counts["on_checkpoint_load_start"] == 1
    assert second.counter.loaded is not None  # the callback got its state back
    resumed = {k: v + _observed(second)[k] for k, v in _observed(first).items()}
    assert resumed == _observed(straight)
    assert second.model.weight.item() == straight.model.weight.item()
    # shuffled data, torch noise and numpy draws all followed the same sequence
    assert len({b["index_sum"] for b in straight.counter.batch_metrics}) > 5


def test_resume_at_the_end_does_nothing_more(train: Train) -> None:
    done = train(onevar.OneVarTrial, HPARAMS, **FIT)
    again = train(onevar.OneVarTrial, HPARAMS, latest_checkpoint=done.counter.uuids[-1], **FIT)
    assert again.counter.batch_metrics == [] and again.counter.validation_metrics == []
    assert again.model.weight.item() == done.model.weight.item()


def test_checkpoint_loads_with_weights_only(train: Train) -> None:
    trial = train(onevar.OneVarTrial, {"lr": 0.1}, max_length=pytorch.Batch(3))
    path = trial.storage / trial.counter.uuids[-1]
    state = torch.load(path / "state_dict.pth", weights_only=True)
    assert state["models_state_dict"][0]["weight"].item() == pytest.approx(
        onevar.expected_weights(0.1, 3)[-1]
    )
    rng = state["rng_state"]
    assert isinstance(rng["np_rng_state"]["keys"], torch.Tensor)
    assert isinstance(rng["random_rng_state"], list)
    load_data = json.loads((path / "load_data.json").read_text())
    assert load_data["trial_type"] == "PyTorchTrial" and load_data["is_trainer"] is True
    assert load_data["trial_cls_spec"] == "onevar:OneVarTrial"
    assert json.loads((path / "metadata.json").read_text())["steps_completed"] == 3
    loaded = pytorch.load_trial_from_checkpoint_path(path)
    assert isinstance(loaded, onevar.OneVarTrial)
    assert loaded.model.weight.item() == trial.model.weight.item()


def test_rng_state_round_trip() -> None:
    random.seed(1)
    np.random.seed(2)
    torch.manual_seed(3)
    state = _checkpoint.get_rng_state(None)
    expected = (random.random(), np.random.random(), torch.rand(1).item())
    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    _checkpoint.set_rng_state(torch.load(buffer, weights_only=True), None)
    assert (random.random(), np.random.random(), torch.rand(1).item()) == expected


def _upstream_checkpoint(directory: pathlib.Path, weight: float, trial_id: int = 0) -> None:
    """A checkpoint in upstream 0.38.1's format: NumPy RNG tuple, trial_state.pkl, load_data."""
    directory.mkdir(parents=True)
    model = torch.nn.Linear(1, 1, bias=False)
    model.weight.data.fill_(weight)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    np.random.seed(5)
    torch.save(
        {
            "models_state_dict": [model.state_dict()],
            "optimizers_state_dict": [optimizer.state_dict()],
            "lr_schedulers_state_dict": [],
            "callbacks": {"counter": {"counts": {"x": 1}}},
            "rng_state": {
                "cpu_rng_state": torch.random.get_rng_state(),
                "np_rng_state": np.random.get_state(),
                "random_rng_state": random.getstate(),
            },
        },
        directory / "state_dict.pth",
    )
    with (directory / "trial_state.pkl").open("wb") as f:
        pickle.dump(
            {
                "trial_id": trial_id,
                "last_ckpt": 4,
                "step_id": 0,
                "last_val": 4,
                "batches_trained": 4,
                "epochs_trained": 0,
            },
            f,
        )
    (directory / "load_data.json").write_text(
        json.dumps(
            {
                "trial_type": "PyTorchTrial",
                "experiment_config": None,
                "hparams": {"global_batch_size": 4, "lr": 0.1},
                "trial_cls_spec": "onevar:OneVarTrial",
                "is_trainer": True,
            }
        )
    )


def test_upstream_checkpoint_resumes_training(train: Train) -> None:
    trial0 = train(onevar.OneVarTrial, {}, max_length=pytorch.Batch(1))
    _upstream_checkpoint(trial0.storage / "upstream-ckpt", weight=0.5)
    np.random.seed(0)
    trial = train(
        onevar.OneVarTrial,
        {"lr": 0.1},
        max_length=pytorch.Batch(6),
        latest_checkpoint="upstream-ckpt",
    )
    # training continued from batch 4 with the checkpoint's weight
    assert trial.counter.startup == [(4, "upstream-ckpt")]
    assert trial.counter.batch_metrics[0]["w_before"] == 0.5
    assert len(trial.counter.batch_metrics) == 2
    assert trial.counter.loaded == {"counts": {"x": 1}}
    # NumPy's RNG came back from upstream's tuple
    np.random.seed(5)
    assert trial.counter.batch_metrics[0]["np_draw"] == np.random.random()
    loaded = pytorch.load_trial_from_checkpoint_path(trial0.storage / "upstream-ckpt")
    assert loaded.model.weight.item() == 0.5


def test_upstream_pickles_with_objects_are_refused(tmp_path: pathlib.Path) -> None:
    class Evil:
        def __reduce__(self) -> Any:
            return (print, ("pwned",))

    (tmp_path / "trial_state.pkl").write_bytes(pickle.dumps(Evil()))
    with pytest.raises(pickle.UnpicklingError, match="refusing"):
        _checkpoint.read_trial_state(tmp_path, {})


def test_warm_start_from_another_trial_starts_at_batch_zero(train: Train) -> None:
    trial0 = train(onevar.OneVarTrial, {}, max_length=pytorch.Batch(1))
    _upstream_checkpoint(trial0.storage / "other-trial", weight=0.25, trial_id=99)
    trial = train(
        onevar.OneVarTrial, {}, max_length=pytorch.Batch(2), latest_checkpoint="other-trial"
    )
    assert trial.counter.startup == [(0, "other-trial")]
    assert trial.counter.batch_metrics[0]["w_before"] == 0.25
    assert len(trial.counter.batch_metrics) == 2


def test_ddp_prefix_is_added_and_removed() -> None:
    model = torch.nn.Linear(2, 1)
    state = {"module." + k: v.clone() + 1 for k, v in model.state_dict().items()}
    _checkpoint.load_model_state(model, state)
    assert torch.equal(model.weight, state["module.weight"])
