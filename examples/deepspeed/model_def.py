"""A small MLP classifying synthetic Gaussian blobs, as a DeepSpeedTrial (no download, CPU is fine).

The DeepSpeed config (``ds_config.json``: ZeRO stage 2, AdamW, warm-up LR) sets the batch sizes:
``train_batch_size`` samples per optimizer step, in micro batches of
``train_micro_batch_size_per_gpu`` on each rank, accumulated as needed. The ``overwrite_deepspeed_args``
hyperparameter writes over any of its values, e.g. ``{"zero_optimization": {"stage": 3}}``.
"""

from __future__ import annotations

from typing import Any

import deepspeed
import torch
from torch import nn

from determined import pytorch
from determined.pytorch import deepspeed as det_ds


def blobs(n: int, classes: int = 4, features: int = 16, seed: int = 0) -> Any:
    """``n`` points around ``classes`` random centres; the same centres for every seed."""
    centres = torch.randn(classes, features, generator=torch.Generator().manual_seed(1234)) * 2
    generator = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, classes, (n,), generator=generator)
    points = centres[labels] + torch.randn(n, features, generator=generator)
    return torch.utils.data.TensorDataset(points, labels)


class BlobsTrial(det_ds.DeepSpeedTrial):
    """Hyperparameters: ``hidden``, ``dropout``, ``deepspeed_config`` (a JSON file of the context
    directory) and ``overwrite_deepspeed_args`` (values written over it)."""

    def __init__(self, context: det_ds.DeepSpeedTrialContext) -> None:
        self.context = context
        hidden = int(context.get_hparam("hidden"))
        model = nn.Sequential(
            nn.Linear(16, hidden),
            nn.ReLU(),
            nn.Dropout(float(context.get_hparam("dropout"))),
            nn.Linear(hidden, 4),
        )
        ds_config = det_ds.overwrite_deepspeed_config(
            context.get_hparam("deepspeed_config"),
            context.get_hparams().get("overwrite_deepspeed_args") or {},
        )
        engine, _, _, _ = deepspeed.initialize(
            model=model, model_parameters=model.parameters(), config=ds_config
        )
        self.engine = context.wrap_model_engine(engine)

    def build_training_data_loader(self) -> pytorch.DataLoader:
        return pytorch.DataLoader(
            blobs(2048, seed=0),
            batch_size=self.context.get_train_micro_batch_size_per_gpu(),
            shuffle=True,
        )

    def build_validation_data_loader(self) -> pytorch.DataLoader:
        return pytorch.DataLoader(
            blobs(512, seed=1), batch_size=self.context.get_train_micro_batch_size_per_gpu()
        )

    def train_batch(self, dataloader_iter: Any, epoch_idx: int, batch_idx: int) -> dict[str, Any]:
        points, labels = self.context.to_device(next(dataloader_iter))
        loss = nn.functional.cross_entropy(self.engine(points), labels)
        self.engine.backward(loss)
        self.engine.step()
        return {"loss": loss, "lr": self.engine.get_lr()[0]}

    def evaluate_batch(self, dataloader_iter: Any, batch_idx: int) -> dict[str, Any]:
        points, labels = self.context.to_device(next(dataloader_iter))
        logits = self.engine(points)
        return {
            "validation_loss": nn.functional.cross_entropy(logits, labels),
            "accuracy": (logits.argmax(dim=1) == labels).float().mean(),
        }
