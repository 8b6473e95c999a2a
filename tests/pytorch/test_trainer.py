"""Trainer.fit off-cluster on the one-variable model: every figure is checked against hand math."""

from __future__ import annotations

import pathlib
from collections.abc import Callable
from typing import Any

import onevar
import pytest
import torch

from determined import pytorch

Train = Callable[..., Any]


def test_training_math_metrics_and_epochs(train: Train) -> None:
    trial = train(
        onevar.OneVarTrial,
        {"lr": 0.1, "dataset_len": 16},
        max_length=pytorch.Batch(8),
        reporting_period=pytorch.Batch(3),
    )
    batches = trial.counter.batch_metrics
    expected = onevar.expected_weights(0.1, 8)
    assert [b["w_after"] for b in batches] == pytest.approx(expected, abs=1e-6)
    for metrics in batches:
        assert metrics["loss"] == pytest.approx((1 - metrics["w_before"]) ** 2, abs=1e-6)
    assert trial.model.weight.item() == pytest.approx(expected[-1], abs=1e-6)
    # reports after batches 3, 6 and the end (8): averages of their batches, plus batches/epochs
    workloads = trial.counter.workload_metrics
    assert [w["batches"] for w in workloads] == [3, 6, 8]
    assert [w["epochs"] for w in workloads] == [0, 1, 2]  # 4 batches per epoch
    first = [b["loss"] for b in batches[:3]]
    assert workloads[0]["loss"] == pytest.approx(sum(first) / 3)
    # the class reducer: sum of label_sum * batch_idx over the workload (label_sum = 4)
    assert [w["cls_reducer"] for w in workloads] == [4 * (0 + 1 + 2), 4 * (3 + 4 + 5), 4 * (6 + 7)]
    assert trial.counter.epochs_started == [0, 1] and trial.counter.epochs_ended == [0, 1]
    # the data: sequential, 4 records per batch, wrapping around after 16
    assert [b["index_sum"] for b in batches[:5]] == [6, 22, 38, 54, 6]


def test_validation_reducers_and_checkpoints(train: Train) -> None:
    trial = train(
        onevar.OneVarTrial,
        {"lr": 0.1, "val_len": 10},
        max_length=pytorch.Batch(8),
        validation_period=pytorch.Batch(4),
        checkpoint_policy="all",
    )
    first, last = trial.counter.validation_metrics
    weights = onevar.expected_weights(0.1, 8)
    assert first["weight"] == pytest.approx(weights[3], abs=1e-6)
    assert first["val_loss"] == pytest.approx((1 - weights[3]) ** 2, abs=1e-6)
    # AVG weighs batches by their length: batches of 4, 4 and 2 records
    assert first["records"] == pytest.approx((4 * 4 + 4 * 4 + 2 * 2) / 10)
    assert first["fn_count"] == 3 and first["fn_sum"] == 10  # the function reducer saw 3 updates
    assert "cls_reducer" in first
    assert last["weight"] == pytest.approx(weights[7], abs=1e-6)
    # "all": a checkpoint after each validation; the end needs no extra one
    assert len(trial.counter.uuids) == 2
    assert all((trial.storage / uuid / "state_dict.pth").exists() for uuid in trial.counter.uuids)


class SumRecordsTrial(onevar.OneVarTrial):
    def evaluation_reducer(self) -> dict[str, pytorch.Reducer]:
        return {
            "val_loss": pytorch.Reducer.MAX,
            "weight": pytorch.Reducer.MIN,
            "records": pytorch.Reducer.SUM,
        }


def test_per_metric_reducers(train: Train) -> None:
    trial = train(SumRecordsTrial, {"val_len": 10}, max_length=pytorch.Batch(2))
    (metrics,) = trial.counter.validation_metrics
    assert metrics["records"] == 10


class BadReducerTrial(onevar.OneVarTrial):
    def evaluation_reducer(self) -> dict[str, pytorch.Reducer]:
        return {"val_loss": pytorch.Reducer.MAX}


def test_reducer_dict_must_cover_every_metric(train: Train) -> None:
    with pytest.raises(ValueError, match="must name every validation metric"):
        train(BadReducerTrial, {}, max_length=pytorch.Batch(1))


def test_every_callback_hook_is_counted(train: Train) -> None:
    trial = train(
        onevar.OneVarTrial,
        {"dataset_len": 16},
        max_length=pytorch.Epoch(2),
        validation_period=pytorch.Epoch(1),
        checkpoint_period=pytorch.Epoch(1),
        reporting_period=pytorch.Batch(2),
        checkpoint_policy="none",
    )
    assert dict(trial.counter.counts) == {
        "on_trial_startup": 1,
        "on_training_start": 1,
        "on_training_epoch_start": 2,
        "on_training_epoch_end": 2,
        "on_training_workload_end": 4,
        "on_validation_start": 2,
        "on_validation_epoch_start": 2,
        "on_validation_epoch_end": 2,
        "on_validation_end": 2,
        "on_checkpoint_save_start": 2,
        "on_checkpoint_write_end": 2,
        "on_checkpoint_upload_end": 2,
        "on_trial_shutdown": 1,
    }
    assert trial.counter.startup == [(0, None)]
    saved = torch.load(
        trial.storage / trial.counter.uuids[-1] / "state_dict.pth", weights_only=True
    )
    assert saved["counter_extra"] == {"saved": True}  # on_checkpoint_save_start may add entries
    assert saved["callbacks"]["counter"]["counts"]["on_training_epoch_end"] == 2


def _lr_schedule(mode: str, frequency: int, batches: int, per_epoch: int, agg: int) -> list[float]:
    """The LR seen by each batch when StepCountLR (lr = base * step count) is stepped per mode."""
    steps, out = 1, []
    for i in range(batches):
        out.append(steps)
        if (i + 1) % agg:
            continue
        if mode == "STEP_EVERY_BATCH":
            steps += sum(1 for j in range(i - agg + 1, i + 1) if (j + 1) % frequency == 0)
        elif mode == "STEP_EVERY_OPTIMIZER_STEP":
            steps += int((i + 1) % frequency == 0)
        elif mode == "STEP_EVERY_EPOCH":
            steps += sum(
                1 for e in range(i // per_epoch, (i + agg) // per_epoch) if (e + 1) % frequency == 0
            )
    return out


@pytest.mark.parametrize(
    ("mode", "frequency", "agg"),
    [
        ("STEP_EVERY_BATCH", 1, 1),
        ("STEP_EVERY_BATCH", 3, 1),
        ("STEP_EVERY_BATCH", 1, 2),
        ("STEP_EVERY_OPTIMIZER_STEP", 2, 1),
        ("STEP_EVERY_OPTIMIZER_STEP", 1, 2),
        ("STEP_EVERY_EPOCH", 1, 1),
        ("STEP_EVERY_EPOCH", 2, 1),
        ("MANUAL_STEP", 1, 1),
    ],
)
def test_lr_scheduler_step_modes(train: Train, mode: str, frequency: int, agg: int) -> None:
    trial = train(
        onevar.OneVarTrial,
        {"lr": 0.001, "dataset_len": 12, "lr_mode": mode, "lr_frequency": frequency},
        max_length=pytorch.Batch(12),
        aggregation_frequency=agg,
    )
    seen = [round(b["lr"] / 0.001) for b in trial.counter.batch_metrics]
    assert seen == _lr_schedule(mode, frequency, 12, 3, agg)


def test_gradient_clipping(train: Train) -> None:
    trial = train(onevar.OneVarTrial, {"lr": 0.1, "clip": 0.5}, max_length=pytorch.Batch(6))
    w = 0.0
    for metrics in trial.counter.batch_metrics:
        w = w + 0.1 * min(2 * (1 - w), 0.5)
        assert metrics["w_after"] == pytest.approx(w, abs=1e-6)
    assert trial.counter.batch_metrics[0]["w_after"] == pytest.approx(0.05)  # clipped from 0.2


def test_gradient_aggregation(train: Train) -> None:
    trial = train(
        onevar.OneVarTrial, {"lr": 0.1}, max_length=pytorch.Batch(8), aggregation_frequency=2
    )
    after = [b["w_after"] for b in trial.counter.batch_metrics]
    steps = onevar.expected_weights(0.1, 4)  # averaged gradients: one SGD step per two batches
    assert after == pytest.approx(
        [0.0, steps[0], steps[0], steps[1], steps[1], steps[2], steps[2], steps[3]], abs=1e-6
    )


def test_test_mode_and_step_zero_validation(train: Train) -> None:
    trial = train(
        onevar.OneVarTrial,
        {"val_len": 12},
        max_length=pytorch.Batch(100),
        test_mode=True,
        step_zero_validation=True,
    )
    assert len(trial.counter.batch_metrics) == 1
    zero, final = trial.counter.validation_metrics
    assert zero["weight"] == 0.0 and zero["fn_count"] == 1  # test mode: one validation batch
    assert final["weight"] > 0
    assert len(trial.counter.uuids) == 1


def test_evaluate_full_dataset_and_batch_without_index(train: Train) -> None:
    full = train(onevar.FullEvalTrial, {"lr": 0.1}, max_length=pytorch.Batch(4))
    (metrics,) = full.counter.validation_metrics
    assert metrics["weight"] == pytest.approx(onevar.expected_weights(0.1, 4)[-1], abs=1e-6)
    assert full.counter.counts["on_validation_epoch_start"] == 0
    plain = train(onevar.NoBatchIdxTrial, {"lr": 0.1}, max_length=pytorch.Batch(4))
    assert "val_loss" in plain.counter.validation_metrics[0]


def test_torch_dataloader_after_disabling_checks(train: Train) -> None:
    trial = train(
        onevar.OneVarTrial, {"torch_loader": True, "dataset_len": 8}, max_length=pytorch.Epoch(2)
    )
    assert len(trial.counter.batch_metrics) == 4
    assert [b["index_sum"] for b in trial.counter.batch_metrics] == [6, 22, 6, 22]


class NoLoaderCheckTrial(onevar.OneVarTrial):
    def build_training_data_loader(self) -> Any:
        return torch.utils.data.DataLoader(onevar.OnesDataset(8), batch_size=4)


class BothEvalTrial(onevar.OneVarTrial):
    def evaluate_full_dataset(self, data_loader: Any) -> dict[str, Any]:
        return {}


@pytest.mark.parametrize(
    ("trial_class", "fit", "error", "match"),
    [
        (onevar.OneVarTrial, {"max_length": None}, ValueError, "max_length: required"),
        (onevar.OneVarTrial, {"max_length": pytorch.Batch([1, 2])}, TypeError, "Batch\\(int\\)"),
        (onevar.OneVarTrial, {"max_length": 5}, TypeError, "max_length"),
        (onevar.OneVarTrial, {"checkpoint_policy": "some"}, ValueError, "checkpoint_policy"),
        (onevar.OneVarTrial, {"validation_period": 3}, TypeError, "validation_period"),
        (NoLoaderCheckTrial, {}, TypeError, "disable_dataset_reproducibility_checks"),
        (BothEvalTrial, {}, ValueError, "exactly one of evaluate_batch"),
    ],
)
def test_bad_arguments_get_clear_errors(
    train: Train, trial_class: type, fit: dict[str, Any], error: type, match: str
) -> None:
    with pytest.raises(error, match=match):
        train(trial_class, {}, **fit)


def test_context_accessors(off_cluster: pathlib.Path) -> None:
    with pytorch.init(
        hparams={"global_batch_size": 10, "x": 1},
        exp_conf={"data": {"a": 1}},
        checkpoint_storage=str(off_cluster / "ckpt"),
    ) as context:
        assert context.get_hparam("x") == 1
        assert context.get_global_batch_size() == 10 and context.get_per_slot_batch_size() == 10
        assert context.get_data_config() == {"a": 1}
        assert context.get_trial_id() == 0 and context.get_experiment_id() == 0
        assert context.device == torch.device("cpu")
        with pytest.raises(ValueError, match="no hyperparameter named 'y'"):
            context.get_hparam("y")
        with pytest.raises(RuntimeError, match="training has not started"):
            context.is_epoch_start()
        model = torch.nn.Linear(1, 1)
        assert context.wrap_model(model) is model
        with pytest.raises(ValueError, match="wrap_optimizer"):
            context.wrap_lr_scheduler(
                torch.optim.lr_scheduler.StepLR(torch.optim.SGD(model.parameters(), 0.1), 1),
                pytorch.LRScheduler.StepMode.STEP_EVERY_BATCH,
            )
        with pytest.raises(ValueError, match="before wrap_model"):
            context.wrap_scaler(torch.amp.GradScaler("cpu", enabled=False))
        data = context.to_device({"a": [torch.ones(1)], "b": (torch.zeros(2),)})
        assert isinstance(data["b"], tuple) and data["a"][0].device.type == "cpu"


def test_tensorboard_files_are_written(train: Train) -> None:
    trial = train(onevar.OneVarTrial, {}, max_length=pytorch.Batch(4), tensorboard=True)
    path = trial.context.get_tensorboard_path()
    assert any("tfevents" in p.name for p in path.rglob("*"))


class AmpTrial(onevar.OneVarTrial):
    def __init__(self, context: pytorch.PyTorchTrialContext) -> None:
        context.experimental.use_amp()  # before wrap_model; full precision without a GPU
        super().__init__(context)


def test_use_amp_and_profiling(train: Train) -> None:
    trial = train(AmpTrial, {"lr": 0.1}, max_length=pytorch.Batch(3), profiling_enabled=True)
    weights = onevar.expected_weights(0.1, 3)
    assert [b["w_after"] for b in trial.counter.batch_metrics] == pytest.approx(weights, abs=1e-6)
    saved = torch.load(
        trial.storage / trial.counter.uuids[-1] / "state_dict.pth", weights_only=True
    )
    assert "scaler_state_dict" in saved
