"""det.pytorch.deepspeed's Trainer in one process on CPU: exact resume under ZeRO 0/2/3, batch and
epoch indices across validation, checkpoint and resume boundaries, gradient accumulation, batch
sizes from the DeepSpeed config, validation, and clear errors."""

from __future__ import annotations

import json
import pathlib
from collections.abc import Callable
from typing import Any

import lintrial
import pytest
import torch

from determined import pytorch
from determined.pytorch import deepspeed as det_ds

Train = Callable[..., Any]
PERIODS = {
    "validation_period": pytorch.Batch(4),
    "checkpoint_period": pytorch.Batch(5),
    "reporting_period": pytorch.Batch(3),
}


def _steps(calls: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The (epoch_idx, batch_idx) of each optimizer step (train_batch runs once per micro batch)."""
    return list(dict.fromkeys(calls))


@pytest.mark.parametrize("stage", [0, 2, 3])
def test_stop_and_resume_matches_an_uninterrupted_run(train: Train, stage: int) -> None:
    straight = train({"stage": stage}, **PERIODS)
    stopped = train({"stage": stage, "stop_at": 6}, **PERIODS)
    resumed = train({"stage": stage}, latest_checkpoint=stopped.recorder.uuids[-1], **PERIODS)

    # the same weights, offset parameter and LR schedule as a run that never stopped
    assert resumed.weights == straight.weights
    assert resumed.weights != stopped.weights
    # 12 steps of 4 micro batches; batch_idx continues across the resume, epochs are 5 steps
    assert straight.calls == [(b // 5, b) for b in range(12) for _ in range(4)]
    assert _steps(stopped.calls) == [(b // 5, b) for b in range(7)]
    assert _steps(resumed.calls) == [(b // 5, b) for b in range(7, 12)]
    assert resumed.recorder.startup == [(7, stopped.recorder.uuids[-1])]
    # reports: the stop after batch 7 carried batch 7's metrics into the checkpoint
    assert stopped.recorder.workloads + resumed.recorder.workloads == straight.recorder.workloads
    assert [w["batches"] for w in straight.recorder.workloads] == [3, 4, 5, 6, 8, 9, 10, 12]
    assert stopped.recorder.validations + resumed.recorder.validations == (
        straight.recorder.validations
    )
    # the state saved by the second checkpoint (taken before its on_checkpoint_save_start)
    assert resumed.recorder.loaded == {"saves": 1}

    # every rank's engine checkpoint and det state, one sharded checkpoint
    ckpt = stopped.storage / stopped.recorder.uuids[-1]
    assert {"det_state_dict_rank0.pth", "load_data.json", "metadata.json", "model0"} <= {
        p.name for p in ckpt.iterdir()
    }
    assert json.loads((ckpt / "metadata.json").read_text())["steps_completed"] == 7
    load_data = json.loads((ckpt / "load_data.json").read_text())
    assert load_data["trial_type"] == "DeepSpeedTrial"
    assert load_data["trial_cls_spec"] == "lintrial:LinTrial"


def test_batch_and_epoch_indices_across_validation_checkpoint_and_resume(train: Train) -> None:
    """Upstream 0.38 restarted batch_idx at 0 after every validation/checkpoint, passed epoch 0 and
    ignored the resume offset; det counts optimizer steps from the start of training."""
    periods = {
        "max_length": pytorch.Epoch(3),
        "validation_period": pytorch.Epoch(1),
        "checkpoint_period": pytorch.Batch(4),
        "reporting_period": pytorch.Batch(2),
    }
    first = train({"stage": 0}, **periods)
    assert _steps(first.calls) == [(b // 5, b) for b in range(15)]
    assert first.recorder.epochs_started == [0, 1, 2]
    assert first.recorder.epochs_ended == [0, 1, 2]
    assert len(first.recorder.validations) == 3  # after each epoch
    # resume from the checkpoint after batch 8 (mid-epoch 1)
    second = train({"stage": 0}, latest_checkpoint=first.recorder.uuids[1], **periods)
    assert _steps(second.calls) == [(b // 5, b) for b in range(8, 15)]
    assert second.recorder.epochs_started == [2]
    assert second.recorder.epochs_ended == [1, 2]
    assert second.weights == first.weights
    assert [w["batches"] for w in second.recorder.workloads] == [10, 12, 14, 15]
    assert [w["epochs"] for w in second.recorder.workloads] == [2, 2, 2, 3]


def test_accumulation_batch_sizes_and_manual_accumulation(train: Train, caplog: Any) -> None:
    auto = train({"stage": 2}, max_length=pytorch.Batch(5))
    context = auto.context
    assert context.get_train_micro_batch_size_per_gpu() == 2
    assert context.get_num_micro_batches_per_slot() == 4
    # batch sizes come from the DeepSpeed config (no global_batch_size hyperparameter)
    assert context.get_global_batch_size() == 8
    assert context.get_per_slot_batch_size() == 8
    assert len(auto.calls) == 20
    manual = train({"stage": 2, "manual": True}, max_length=pytorch.Batch(5))
    assert manual.calls == [(0, b) for b in range(5)]  # one call per optimizer step
    # the same engine steps in the same order: the same engine weights (offset steps differ)
    assert manual.weights[:-2] == auto.weights[:-2]
    with pytest.warns(FutureWarning):
        assert manual.context.num_micro_batches_per_slot == 4
    # a global_batch_size hyperparameter that disagrees with the config: the config wins, loudly
    caplog.set_level("WARNING")
    odd = train({"stage": 0, "global_batch_size": 16}, max_length=pytorch.Batch(1))
    assert odd.context.get_global_batch_size() == 8
    assert "differs from the DeepSpeed config's train_batch_size" in caplog.text


def test_validation_loaders_and_test_mode(train: Train) -> None:
    trial = train({"stage": 3}, max_length=pytorch.Batch(2))
    (metrics,) = trial.recorder.validations
    # batches of 4, 4 and 2 records, averaged per sample: (4*4 + 4*4 + 2*2) / 10
    assert metrics["n"] == pytest.approx(3.6)
    full = train({"stage": 3}, trial_class=lintrial.FullEvalTrial, max_length=pytorch.Batch(2))
    assert full.recorder.validations == [{"records": 10, "rank": 0}]
    # plain torch loaders once the reproducibility checks are off
    plain = train({"stage": 0, "torch_loader": True}, max_length=pytorch.Epoch(2))
    assert _steps(plain.calls)[-1] == (1, 9)
    assert plain.recorder.validations[0]["n"] == pytest.approx(3.6)
    # test mode: one batch, one validation batch, a checkpoint
    quick = train({"stage": 0}, max_length=pytorch.Batch(50), test_mode=True)
    assert _steps(quick.calls) == [(0, 0)]
    assert quick.recorder.validations[0]["n"] == 4 and len(quick.recorder.uuids) == 1


def test_cpu_shared_memory_op_is_not_built(train: Train) -> None:
    from deepspeed.comm import comm

    train({"stage": 0}, max_length=pytorch.Batch(1))
    assert comm.cdb is not None and comm.cdb.shm_comm_op is None


class NoEngine(det_ds.DeepSpeedTrial):
    def __init__(self, context: det_ds.DeepSpeedTrialContext) -> None:
        self.context = context

    def train_batch(self, dataloader_iter: Any, epoch_idx: int, batch_idx: int) -> Any:
        raise AssertionError("never trained")

    def build_training_data_loader(self) -> Any:
        return pytorch.DataLoader(lintrial.Regression(8), batch_size=2)

    def build_validation_data_loader(self) -> Any:
        return pytorch.DataLoader(lintrial.Regression(8), batch_size=2)

    def evaluate_batch(self, dataloader_iter: Any, batch_idx: int) -> dict[str, Any]:
        return {}


def test_clear_errors(off_cluster: pathlib.Path) -> None:
    with det_ds.init(
        hparams=dict(lintrial.HPARAMS),
        checkpoint_storage=str(off_cluster / "ckpt"),
        enable_tensorboard_logging=False,
    ) as context:
        with pytest.raises(RuntimeError, match="set_mpu: call wrap_model_engine"):
            context.set_mpu(det_ds.make_data_parallel_mpu(context.distributed))
        trial = NoEngine(context)
        with pytest.raises(ValueError, match="wrapped no model engine"):
            det_ds.Trainer(trial, context).fit(max_length=pytorch.Batch(1))
        with pytest.raises(TypeError, match="expected a det.pytorch.deepspeed.DeepSpeedTrial"):
            det_ds.Trainer(object(), context)  # type: ignore[arg-type]
        with pytest.raises(RuntimeError, match="wrap_model_engine"):
            context.wrap_model(torch.nn.Linear(1, 1))
        with pytest.raises(TypeError, match="wrap_model_engine: expected the engine"):
            context.wrap_model_engine(torch.nn.Linear(1, 1))  # type: ignore[arg-type]
        with pytest.raises(RuntimeError, match="engine.backward"):
            context.backward(torch.zeros(()))
        real = lintrial.LinTrial(context)
        with pytest.raises(ValueError, match="belongs to a DeepSpeed engine"):
            context.wrap_optimizer(real.engine.optimizer.optimizer)
        with pytest.raises(ValueError, match="max_length: required off-cluster"):
            det_ds.Trainer(real, context).fit()
        bad_loader = lintrial.LinTrial(context)
        bad_loader.build_training_data_loader = lambda: torch.utils.data.DataLoader(  # type: ignore[method-assign]
            lintrial.Regression(8), batch_size=2
        )
        with pytest.raises(TypeError, match="build_training_data_loader.*disable_dataset_repro"):
            det_ds.Trainer(bad_loader, context).fit(max_length=pytorch.Batch(1))
    with pytest.raises(TypeError, match="context: expected the DeepSpeedTrialContext"):
        det_ds.Trainer(real, object())  # type: ignore[arg-type]


def test_overwrite_deepspeed_config(tmp_path: pathlib.Path) -> None:
    base = {"train_batch_size": 8, "zero_optimization": {"stage": 2, "overlap_comm": True}}
    merged = det_ds.overwrite_deepspeed_config(base, {"zero_optimization": {"stage": 3}, "x": [1]})
    assert merged == {
        "train_batch_size": 8,
        "zero_optimization": {"stage": 3, "overlap_comm": True},
        "x": [1],
    }
    assert base["zero_optimization"] == {"stage": 2, "overlap_comm": True}  # not modified
    path = tmp_path / "ds_config.json"
    path.write_text(json.dumps(base))
    assert (
        det_ds.overwrite_deepspeed_config(str(path), {"train_batch_size": 4})["train_batch_size"]
        == 4
    )
    path.write_text('{"train_batch_size": 8, "train_batch_size": 4}')
    with pytest.raises(ValueError, match="duplicate key 'train_batch_size'"):
        det_ds.overwrite_deepspeed_config(path, {})
    with pytest.raises(ValueError, match="cannot read"):
        det_ds.overwrite_deepspeed_config(tmp_path / "missing.json", {})
    with pytest.raises(TypeError, match="base_ds_config"):
        det_ds.overwrite_deepspeed_config(3, {})  # type: ignore[arg-type]
