"""The one-variable model of upstream's PyTorchTrial tests, written for det.

One weight ``w`` (starting at 0), no bias, MSE loss, and a dataset of ``(1, 1)`` pairs: every batch
has loss ``(1 - w)**2`` and gradient ``-2 (1 - w)``, so plain SGD moves ``w`` to
``w + 2 lr (1 - w)`` each step and every figure of a run can be computed by hand.

Hyperparameters pick the features under test: ``lr``, ``global_batch_size``, ``dataset_len``,
``clip`` (max gradient value), ``lr_mode``/``lr_frequency`` (an LR scheduler whose LR is its own
step count times ``lr``), ``shuffle``, ``noise`` (labels ``1 + N(0, noise)`` drawn from torch's
global RNG in ``train_batch``, to test RNG restore), ``full_eval`` (evaluate_full_dataset),
``torch_loader`` (a plain torch DataLoader), ``no_batch_idx`` (evaluate_batch(batch)).
"""

from __future__ import annotations

import collections
import os
import signal
from typing import Any

import numpy as np
import torch

from determined import pytorch


class OnesDataset(torch.utils.data.Dataset):
    """``n`` records ``(x, y) = ([1.0], [1.0])``, plus each record's index as a third field."""

    def __init__(self, n: int = 64) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return torch.ones(1), torch.ones(1), torch.tensor(index)


class StepCountLR(torch.optim.lr_scheduler.LRScheduler):
    """LR = base LR * number of times the scheduler was stepped (1 after construction)."""

    def get_lr(self) -> list[float]:
        return [base * self._step_count for base in self.base_lrs]


class Counter(pytorch.PyTorchCallback):
    """Counts every hook, keeps a few arguments, and is stateful (its counts are checkpointed)."""

    def __init__(self) -> None:
        self.counts: collections.Counter[str] = collections.Counter()
        self.epochs_started: list[int] = []
        self.epochs_ended: list[int] = []
        self.validation_metrics: list[dict[str, Any]] = []
        self.workload_metrics: list[dict[str, Any]] = []
        self.batch_metrics: list[dict[str, Any]] = []
        self.uuids: list[str] = []
        self.startup: list[tuple[int, str | None]] = []
        self.loaded: dict[str, Any] | None = None

    def on_trial_startup(self, first_batch_idx: int, checkpoint_uuid: str | None) -> None:
        self.counts["on_trial_startup"] += 1
        self.startup.append((first_batch_idx, checkpoint_uuid))

    def on_trial_shutdown(self) -> None:
        self.counts["on_trial_shutdown"] += 1

    def on_training_start(self) -> None:
        self.counts["on_training_start"] += 1

    def on_training_epoch_start(self, epoch_idx: int) -> None:
        self.counts["on_training_epoch_start"] += 1
        self.epochs_started.append(epoch_idx)

    def on_training_epoch_end(self, epoch_idx: int) -> None:
        self.counts["on_training_epoch_end"] += 1
        self.epochs_ended.append(epoch_idx)

    def on_training_workload_end(
        self, avg_metrics: dict[str, Any], batch_metrics: list[dict[str, Any]]
    ) -> None:
        self.counts["on_training_workload_end"] += 1
        self.workload_metrics.append(avg_metrics)
        self.batch_metrics.extend(batch_metrics)

    def on_validation_start(self) -> None:
        self.counts["on_validation_start"] += 1

    def on_validation_epoch_start(self) -> None:
        self.counts["on_validation_epoch_start"] += 1

    def on_validation_epoch_end(self, outputs: list[Any]) -> None:
        self.counts["on_validation_epoch_end"] += 1

    def on_validation_end(self, metrics: dict[str, Any]) -> None:
        self.counts["on_validation_end"] += 1
        self.validation_metrics.append(metrics)

    def on_checkpoint_load_start(self, checkpoint: dict[str, Any]) -> None:
        self.counts["on_checkpoint_load_start"] += 1

    def on_checkpoint_save_start(self, checkpoint: dict[str, Any]) -> None:
        self.counts["on_checkpoint_save_start"] += 1
        checkpoint["counter_extra"] = {"saved": True}

    def on_checkpoint_write_end(self, checkpoint_dir: str) -> None:
        self.counts["on_checkpoint_write_end"] += 1

    def on_checkpoint_upload_end(self, uuid: str) -> None:
        self.counts["on_checkpoint_upload_end"] += 1
        self.uuids.append(uuid)

    def state_dict(self) -> dict[str, Any]:
        return {"counts": dict(self.counts), "epochs_started": list(self.epochs_started)}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.loaded = state_dict


class TriangleLabelSum(pytorch.MetricReducer):
    """Sum over updates of ``label_sum * batch_idx`` (a class-based reducer)."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.sum = 0.0

    def update(self, label_sum: float, batch_idx: int) -> None:
        self.sum += label_sum * batch_idx

    def per_slot_reduce(self) -> float:
        return self.sum

    def cross_slot_reduce(self, per_slot_metrics: list[float]) -> float:
        return sum(per_slot_metrics)


def label_count(values: list[float]) -> dict[str, float]:
    """A function reducer returning several metrics."""
    return {"fn_count": float(len(values)), "fn_sum": float(sum(values))}


class OneVarTrial(pytorch.PyTorchTrial):
    def __init__(self, context: pytorch.PyTorchTrialContext) -> None:
        self.context = context
        self.hp = context.get_hparams()
        self.lr = float(self.hp.get("lr", 0.1))
        model = torch.nn.Linear(1, 1, bias=False)
        model.weight.data.fill_(0.0)
        self.model = context.wrap_model(model)
        self.opt = context.wrap_optimizer(torch.optim.SGD(self.model.parameters(), lr=self.lr))
        self.scheduler = None
        if self.hp.get("lr_mode"):
            mode = pytorch.LRScheduler.StepMode[self.hp["lr_mode"]]
            self.scheduler = context.wrap_lr_scheduler(
                StepCountLR(self.opt), mode, frequency=int(self.hp.get("lr_frequency", 1))
            )
        self.cls_reducer = context.wrap_reducer(
            TriangleLabelSum(), name="cls_reducer", for_training=not self.hp.get("no_train_reducer")
        )
        self.fn_reducer = context.wrap_reducer(label_count, for_training=False)
        self.counter = Counter()
        self.stop_at = int(self.hp.get("stop_at", 0))
        if self.hp.get("torch_loader"):
            context.experimental.disable_dataset_reproducibility_checks()

    def _loader(self, n: int, shuffle: bool) -> Any:
        batch_size = self.context.get_per_slot_batch_size()
        if self.hp.get("torch_loader"):
            return torch.utils.data.DataLoader(OnesDataset(n), batch_size=batch_size)
        return pytorch.DataLoader(OnesDataset(n), batch_size=batch_size, shuffle=shuffle)

    def build_training_data_loader(self) -> Any:
        return self._loader(int(self.hp.get("dataset_len", 64)), bool(self.hp.get("shuffle")))

    def build_validation_data_loader(self) -> Any:
        return self._loader(int(self.hp.get("val_len", 64)), False)

    def build_callbacks(self) -> dict[str, pytorch.PyTorchCallback]:
        return {"counter": self.counter}

    def train_batch(self, batch: Any, epoch_idx: int, batch_idx: int) -> dict[str, Any]:
        data, label, index = batch
        if self.hp.get("noise"):
            label = label + float(self.hp["noise"]) * torch.randn(label.shape)
        self.cls_reducer.update(float(label.sum()), batch_idx)
        w_before = self.model.weight.data.item()
        loss = torch.nn.functional.mse_loss(self.model(data), label)
        self.context.backward(loss)
        clip = self.hp.get("clip")
        self.context.step_optimizer(
            self.opt,
            clip_grads=(lambda params: torch.nn.utils.clip_grad_value_(params, clip))
            if clip
            else None,
        )
        if self.stop_at and batch_idx + 1 == self.stop_at:
            if self.hp.get("stop_how") == "sigterm":
                if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, signal.SIG_IGN, None):
                    raise RuntimeError("no SIGTERM handler installed: refusing to kill myself")
                os.kill(os.getpid(), signal.SIGTERM)
            else:
                self.context.set_stop_requested(True)
        return {
            "loss": loss,
            "w_before": w_before,
            "w_after": self.model.weight.data.item(),
            "lr": self.opt.param_groups[0]["lr"],
            "index_sum": index.sum(),
            "np_draw": float(np.random.random()),
        }

    def evaluate_batch(self, batch: Any, batch_idx: int) -> dict[str, Any]:
        data, label, _ = batch
        loss = torch.nn.functional.mse_loss(self.model(data), label)
        self.fn_reducer.update(float(label.sum()))
        return {"val_loss": loss, "weight": self.model.weight.data.item(), "records": len(data)}


class FullEvalTrial(OneVarTrial):
    def evaluate_full_dataset(self, data_loader: Any) -> dict[str, Any]:
        losses = [
            torch.nn.functional.mse_loss(self.model(data), label).item()
            for data, label, _ in data_loader
        ]
        return {"val_loss": sum(losses) / len(losses), "weight": self.model.weight.data.item()}


FullEvalTrial.evaluate_batch = pytorch.PyTorchTrial.evaluate_batch  # type: ignore[method-assign]


class NoBatchIdxTrial(OneVarTrial):
    def evaluate_batch(self, batch: Any) -> dict[str, Any]:  # type: ignore[override]
        data, label, _ = batch
        return {"val_loss": torch.nn.functional.mse_loss(self.model(data), label)}


def expected_weights(lr: float, steps: int, w: float = 0.0) -> list[float]:
    """The weight after each of ``steps`` plain SGD steps from ``w``."""
    out = []
    for _ in range(steps):
        w = w + 2 * lr * (1 - w)
        out.append(w)
    return out
