"""A small MLP that classifies scikit-learn's bundled 8x8 digits (no download) as a PyTorchTrial."""

from __future__ import annotations

from typing import Any

import torch
from sklearn.datasets import load_digits
from torch import nn

from determined import pytorch


def digits_datasets(validation_fraction: float = 0.2) -> tuple[Any, Any]:
    """Train and validation TensorDatasets: 1797 images of 64 pixels scaled to [0, 1], 10 classes."""
    digits = load_digits()
    x = torch.tensor(digits.data, dtype=torch.float32) / 16.0
    y = torch.tensor(digits.target, dtype=torch.long)
    order = torch.randperm(len(x), generator=torch.Generator().manual_seed(0))
    cut = int(len(x) * (1 - validation_fraction))
    train, val = order[:cut], order[cut:]
    return (
        torch.utils.data.TensorDataset(x[train], y[train]),
        torch.utils.data.TensorDataset(x[val], y[val]),
    )


class DigitsTrial(pytorch.PyTorchTrial):
    """Hyperparameters: ``global_batch_size``, ``lr``, ``hidden``, ``dropout``, ``momentum``."""

    def __init__(self, context: pytorch.PyTorchTrialContext) -> None:
        self.context = context
        self.train_data, self.val_data = digits_datasets()
        hidden = int(context.get_hparam("hidden"))
        self.model = context.wrap_model(
            nn.Sequential(
                nn.Linear(64, hidden),
                nn.ReLU(),
                nn.Dropout(float(context.get_hparam("dropout"))),
                nn.Linear(hidden, 10),
            )
        )
        self.optimizer = context.wrap_optimizer(
            torch.optim.SGD(
                self.model.parameters(),
                lr=float(context.get_hparam("lr")),
                momentum=float(context.get_hparam("momentum")),
            )
        )
        self.scheduler = context.wrap_lr_scheduler(
            torch.optim.lr_scheduler.StepLR(self.optimizer, step_size=10, gamma=0.8),
            pytorch.LRScheduler.StepMode.STEP_EVERY_EPOCH,
        )

    def build_training_data_loader(self) -> pytorch.DataLoader:
        return pytorch.DataLoader(
            self.train_data, batch_size=self.context.get_per_slot_batch_size(), shuffle=True
        )

    def build_validation_data_loader(self) -> pytorch.DataLoader:
        return pytorch.DataLoader(self.val_data, batch_size=self.context.get_per_slot_batch_size())

    def train_batch(self, batch: Any, epoch_idx: int, batch_idx: int) -> dict[str, Any]:
        images, labels = batch
        loss = nn.functional.cross_entropy(self.model(images), labels)
        self.context.backward(loss)
        self.context.step_optimizer(self.optimizer)
        return {"loss": loss}

    def evaluate_batch(self, batch: Any, batch_idx: int) -> dict[str, Any]:
        images, labels = batch
        logits = self.model(images)
        return {
            "validation_loss": nn.functional.cross_entropy(logits, labels),
            "accuracy": (logits.argmax(dim=1) == labels).float().mean(),
        }
