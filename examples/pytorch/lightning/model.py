"""A digits classifier as a LightningModule, on scikit-learn's bundled 8x8 digits (no download)."""

from __future__ import annotations

from typing import Any

import pytorch_lightning as pl
import torch
from sklearn.datasets import load_digits
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset, random_split


class DigitsClassifier(pl.LightningModule):
    """A small MLP: 64 pixels -> hidden_size -> 10 classes."""

    def __init__(
        self, lr: float = 0.01, hidden_size: int = 64, dropout: float = 0.1, **_other: Any
    ) -> None:
        super().__init__()
        self.save_hyperparameters("lr", "hidden_size", "dropout")
        self.net = torch.nn.Sequential(
            torch.nn.Linear(64, hidden_size),
            torch.nn.ReLU(),
            torch.nn.Dropout(dropout),
            torch.nn.Linear(hidden_size, 10),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def training_step(
        self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int
    ) -> torch.Tensor:
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        x, y = batch
        logits = self(x)
        self.log("val_loss", F.cross_entropy(logits, y))
        self.log("val_accuracy", (logits.argmax(dim=1) == y).float().mean())

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=self.hparams["lr"])


class DigitsDataModule(pl.LightningDataModule):
    """1797 digit images, split 80/20 into training and validation (the same split every time)."""

    def __init__(self, batch_size: int = 32, **_other: Any) -> None:
        super().__init__()
        self.batch_size = int(batch_size)

    def setup(self, stage: str) -> None:
        digits = load_digits()
        x = torch.tensor(digits.data, dtype=torch.float32) / 16.0
        y = torch.tensor(digits.target, dtype=torch.long)
        dataset = TensorDataset(x, y)
        n_val = len(dataset) // 5
        self.train_set, self.val_set = random_split(
            dataset, [len(dataset) - n_val, n_val], generator=torch.Generator().manual_seed(0)
        )

    def train_dataloader(self) -> DataLoader:
        return DataLoader(self.train_set, batch_size=self.batch_size, shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.val_set, batch_size=256)
