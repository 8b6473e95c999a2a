"""A small DeepSpeedTrial on synthetic data, for the det.pytorch.deepspeed tests.

A two-layer regression model with dropout (so resuming must restore the RNG) trained by a DeepSpeed
engine with AdamW (``torch_adam``: no FusedAdam compile), ``train_batch_size`` 8 from micro batches
of 2 (4 accumulation steps in one process, 2 on two ranks), on 40 shuffled records: 5 optimizer
steps per epoch.

Hyperparameters: ``seed`` (of torch's RNG), ``stage`` (ZeRO stage), ``lr``, ``dataset_len``,
``val_len``, ``dropout``,
``stop_at`` (ask to stop after that batch, on rank ``stop_rank``), ``manual`` (take every micro
batch of a step in one ``train_batch`` call), ``full_eval`` (``evaluate_full_dataset``),
``torch_loader`` (plain torch DataLoaders), ``slow`` (seconds of sleep per step).
"""

from __future__ import annotations

import time
from typing import Any

import deepspeed
import torch

from determined import pytorch
from determined.pytorch import deepspeed as det_ds

HPARAMS: dict[str, Any] = {
    "stage": 2, "lr": 0.01, "dataset_len": 40, "val_len": 10, "dropout": 0.1, "seed": 7,
}  # fmt: skip


class Regression(torch.utils.data.Dataset):
    """``n`` records ``(x, y)`` with ``y = sum(x) / 2``; ``x`` is fixed by the seed."""

    def __init__(self, n: int, seed: int = 0) -> None:
        generator = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, 4, generator=generator)
        self.y = self.x.sum(dim=1, keepdim=True) / 2

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.x[index], self.y[index]


class Recorder(pytorch.PyTorchCallback):
    """Records the loop's calls; its state (checkpoints seen, the offset parameter) is saved."""

    def __init__(self, offset: torch.nn.Parameter) -> None:
        self.offset = offset  # a parameter outside the engine: saved as callback state
        self.uuids: list[str] = []
        self.startup: list[tuple[int, str | None]] = []
        self.epochs_started: list[int] = []
        self.epochs_ended: list[int] = []
        self.workloads: list[dict[str, Any]] = []
        self.validations: list[dict[str, Any]] = []
        self.saves = 0
        self.loaded: dict[str, Any] | None = None

    def on_trial_startup(self, first_batch_idx: int, checkpoint_uuid: str | None) -> None:
        self.startup.append((first_batch_idx, checkpoint_uuid))

    def on_training_epoch_start(self, epoch_idx: int) -> None:
        self.epochs_started.append(epoch_idx)

    def on_training_epoch_end(self, epoch_idx: int) -> None:
        self.epochs_ended.append(epoch_idx)

    def on_training_workload_end(
        self, avg_metrics: dict[str, Any], batch_metrics: list[dict[str, Any]]
    ) -> None:
        self.workloads.append(dict(avg_metrics))

    def on_validation_end(self, metrics: dict[str, Any]) -> None:
        self.validations.append(dict(metrics))

    def on_checkpoint_save_start(self, checkpoint: dict[str, Any]) -> None:
        self.saves += 1

    def on_checkpoint_upload_end(self, uuid: str) -> None:
        self.uuids.append(uuid)

    def state_dict(self) -> dict[str, Any]:
        return {"saves": self.saves, "offset": self.offset.detach().clone()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        with torch.no_grad():
            self.offset.copy_(state_dict["offset"])
        self.loaded = {"saves": state_dict["saves"]}


def ds_config(stage: int, lr: float) -> dict[str, Any]:
    return {
        "train_batch_size": 8,
        "train_micro_batch_size_per_gpu": 2,
        "optimizer": {"type": "AdamW", "params": {"lr": lr, "torch_adam": True}},
        "zero_optimization": {"stage": stage},
        "steps_per_print": 10**9,
    }


class LinTrial(det_ds.DeepSpeedTrial):
    def __init__(self, context: det_ds.DeepSpeedTrialContext) -> None:
        self.context = context
        self.hp = {**HPARAMS, **context.get_hparams()}
        # Seeded from the hyperparameters, so runs on a master compare with runs off-cluster
        # whatever trial seed the master chose.
        torch.manual_seed(int(self.hp["seed"]))
        model = torch.nn.Sequential(
            torch.nn.Linear(4, 8),
            torch.nn.Dropout(float(self.hp["dropout"])),
            torch.nn.Linear(8, 1),
        )
        config = det_ds.overwrite_deepspeed_config(
            ds_config(int(self.hp["stage"]), float(self.hp["lr"])), self.hp.get("overwrite") or {}
        )
        engine, _, _, _ = deepspeed.initialize(
            model=model, model_parameters=model.parameters(), config=config
        )
        self.engine = context.wrap_model_engine(engine)
        # A parameter no engine owns: its optimizer and LR scheduler are wrapped by the context,
        # so det checkpoints and restores them (the parameter itself goes into callback state).
        self.offset = torch.nn.Parameter(torch.zeros(1))
        self.offset_optimizer = context.wrap_optimizer(torch.optim.SGD([self.offset], lr=0.1))
        self.offset_scheduler = context.wrap_lr_scheduler(
            torch.optim.lr_scheduler.StepLR(self.offset_optimizer, step_size=3, gamma=0.5),
            pytorch.LRScheduler.StepMode.STEP_EVERY_BATCH,
        )
        if self.hp.get("manual"):
            context.disable_auto_grad_accumulation()
        if self.hp.get("torch_loader"):
            context.disable_dataset_reproducibility_checks()
        self.recorder = Recorder(self.offset)
        self.calls: list[tuple[int, int]] = []

    def build_callbacks(self) -> dict[str, pytorch.PyTorchCallback]:
        return {"recorder": self.recorder}

    def build_training_data_loader(self) -> Any:
        data = Regression(int(self.hp["dataset_len"]))
        micro = self.context.get_train_micro_batch_size_per_gpu()
        if self.hp.get("torch_loader"):
            return torch.utils.data.DataLoader(data, batch_size=micro)
        return pytorch.DataLoader(data, batch_size=micro, shuffle=True)

    def build_validation_data_loader(self) -> Any:
        data = Regression(int(self.hp["val_len"]), seed=1)
        if self.hp.get("torch_loader"):
            return torch.utils.data.DataLoader(data, batch_size=4)
        return pytorch.DataLoader(data, batch_size=4)

    def _micro_step(self, dataloader_iter: Any) -> torch.Tensor:
        x, y = self.context.to_device(next(dataloader_iter))
        loss = torch.nn.functional.mse_loss(self.engine(x), y)
        self.engine.backward(loss)
        self.engine.step()
        return loss

    def train_batch(self, dataloader_iter: Any, epoch_idx: int, batch_idx: int) -> dict[str, Any]:
        self.calls.append((epoch_idx, batch_idx))
        if self.hp.get("slow"):
            time.sleep(float(self.hp["slow"]))
        if self.hp.get("manual"):
            steps = self.context.get_num_micro_batches_per_slot()
            loss = torch.stack([self._micro_step(dataloader_iter) for _ in range(steps)]).mean()
        else:
            loss = self._micro_step(dataloader_iter)
        self.offset_optimizer.zero_grad()
        ((self.offset - 1.0) ** 2).sum().backward()
        self.offset_optimizer.step()
        stop_at, stop_rank = self.hp.get("stop_at"), int(self.hp.get("stop_rank", 0))
        if stop_at is not None and (batch_idx, self.context.distributed.rank) == (
            stop_at,
            stop_rank,
        ):
            self.context.set_stop_requested(True)
        return {"loss": loss, "batch_idx": batch_idx}

    def evaluate_batch(self, dataloader_iter: Any, batch_idx: int) -> dict[str, Any]:
        x, y = self.context.to_device(next(dataloader_iter))
        return {"val_loss": torch.nn.functional.mse_loss(self.engine(x), y), "n": len(x)}


class FullEvalTrial(LinTrial):
    """Validation over the whole, unsharded validation set (on every rank)."""

    evaluate_batch = det_ds.DeepSpeedTrial.evaluate_batch  # type: ignore[assignment]

    def evaluate_full_dataset(self, data_loader: Any) -> dict[str, Any]:
        records = sum(len(x) for x, _ in data_loader)
        return {"records": records, "rank": self.context.distributed.rank}


def weights(trial: LinTrial) -> list[float]:
    """The engine's parameters as one flat list (gathered from every rank under ZeRO stage 3;
    every rank must call it), then the offset parameter and its learning rate."""
    params = list(trial.engine.module.parameters())
    with deepspeed.zero.GatheredParameters(params):
        flat = torch.cat([p.detach().flatten().clone() for p in params]).tolist()
    return [*flat, trial.offset.item(), trial.offset_scheduler.get_last_lr()[0]]
