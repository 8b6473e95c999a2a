"""A tiny LightningModule and its data, for the det.pytorch.lightning tests.

Run as an experiment entrypoint (``python3 tiny.py``) it trains through ``det_lightning.fit``;
``data.wait_for_pause_at: N`` makes the first run hold at step N until it is preempted.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Iterator
from typing import Any

import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader, TensorDataset

import determined as det
from determined.pytorch import lightning as det_lightning

N_SAMPLES = 64
BATCH_SIZE = 8
BATCHES_PER_EPOCH = N_SAMPLES // BATCH_SIZE


class TinyModule(pl.LightningModule):
    """Linear -> dropout -> linear regression of the feature sum (dropout makes RNG matter)."""

    def __init__(self, lr: float = 0.05, hidden: int = 8, **_other: Any) -> None:
        super().__init__()
        self.save_hyperparameters("lr", "hidden")
        self.net = torch.nn.Sequential(
            torch.nn.Linear(4, hidden), torch.nn.Dropout(0.3), torch.nn.Linear(hidden, 1)
        )

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.net(x), y)
        self.log("loss", loss)
        return loss

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        self.log("val_loss", torch.nn.functional.mse_loss(self.net(x), y))

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=self.hparams["lr"])


def dataset() -> TensorDataset:
    x = torch.randn(N_SAMPLES, 4, generator=torch.Generator().manual_seed(0))
    return TensorDataset(x, x.sum(dim=1, keepdim=True))


def train_loader() -> DataLoader:
    """Shuffled with the global torch generator: resuming exactly needs the RNG state back."""
    return DataLoader(dataset(), batch_size=BATCH_SIZE, shuffle=True)


def val_loader() -> DataLoader:
    return DataLoader(dataset(), batch_size=16)


class TinyDataModule(pl.LightningDataModule):
    def __init__(self, **_hparams: Any) -> None:
        super().__init__()

    def train_dataloader(self) -> DataLoader:
        return train_loader()

    def val_dataloader(self) -> DataLoader:
        return val_loader()


class ResumableLoader:
    """A training loader with Lightning's resumable interface (``state_dict``/``load_state_dict``).

    Each epoch's order comes from its own seeded generator; the state is the epoch and how many of
    its batches were handed out (Lightning does not fetch ahead from a loader with a length).
    """

    def __init__(self, seed: int = 0) -> None:
        self.data = dataset()
        self.seed = seed
        self.epoch = 0
        self.handed_out = 0
        self.loaded: dict[str, int] | None = None

    def __len__(self) -> int:
        return BATCHES_PER_EPOCH

    def __iter__(self) -> Iterator[list[torch.Tensor]]:
        if self.handed_out >= BATCHES_PER_EPOCH:
            self.epoch, self.handed_out = self.epoch + 1, 0
        generator = torch.Generator().manual_seed(self.seed + self.epoch)
        order = torch.randperm(N_SAMPLES, generator=generator)
        while self.handed_out < BATCHES_PER_EPOCH:
            batch = self.handed_out
            self.handed_out += 1
            x, y = self.data[order[batch * BATCH_SIZE : (batch + 1) * BATCH_SIZE]]
            yield [x, y]

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "handed_out": self.handed_out}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.loaded = dict(state)
        self.epoch, self.handed_out = state["epoch"], state["handed_out"]


class PreemptAt(pl.Callback):
    """Sends this process SIGTERM (det's off-cluster preemption signal) after step ``step``."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_train_batch_end(self, trainer: pl.Trainer, *args: Any) -> None:
        if trainer.global_step == self.step:
            handler = signal.getsignal(signal.SIGTERM)
            assert callable(handler), "det's SIGTERM handler is not installed"
            os.kill(os.getpid(), signal.SIGTERM)


class WaitForPause(pl.Callback):
    """On a trial's first run, holds at step ``step`` until det asks the trial to stop."""

    def __init__(self, core_context: det.core.Context, step: int) -> None:
        self.core_context = core_context
        self.step = step

    def on_train_batch_end(self, trainer: pl.Trainer, *args: Any) -> None:
        if trainer.global_step != self.step:
            return
        logging.info("waiting for a pause at step %d", self.step)
        deadline = time.monotonic() + 120
        while not self.core_context.preempt.should_preempt(auto_ack=False):
            if time.monotonic() > deadline:
                raise SystemExit("never preempted")
            time.sleep(0.02)
        logging.info("pause noticed at step %d", self.step)


def main() -> None:
    info = det.get_cluster_info()
    assert info is not None, "tiny.py runs as an experiment entrypoint"
    wait_at = info.user_data.get("wait_for_pause_at")
    with det.core.init() as core_context:
        callbacks = []
        if wait_at is not None and info.latest_checkpoint is None:
            callbacks.append(WaitForPause(core_context, int(wait_at)))
        det_lightning.fit(
            TinyModule,
            TinyDataModule,
            core_context=core_context,
            trainer_kwargs={
                "max_epochs": 3,
                "callbacks": callbacks,
                "log_every_n_steps": 2,
                "enable_model_summary": False,
                "num_sanity_val_steps": 0,
            },
        )


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
    main()
