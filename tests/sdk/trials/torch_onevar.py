"""A one-weight PyTorchTrial (``y = w x``, ``w`` starts at 0 and moves toward 1) for the
download-and-load round trip: its validation reports ``w``, so a test can tell whether a loaded
checkpoint holds the trained weight of its step."""

from __future__ import annotations

from typing import Any

import torch

from determined import pytorch


class Ones(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 16

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.ones(1), torch.ones(1)


class OneVarTrial(pytorch.PyTorchTrial):
    def __init__(self, context: pytorch.PyTorchTrialContext) -> None:
        self.context = context
        model = torch.nn.Linear(1, 1, bias=False)
        torch.nn.init.zeros_(model.weight)
        self.model = context.wrap_model(model)
        self.opt = context.wrap_optimizer(torch.optim.SGD(self.model.parameters(), lr=0.1))

    def build_training_data_loader(self) -> pytorch.DataLoader:
        return pytorch.DataLoader(Ones(), batch_size=self.context.get_per_slot_batch_size())

    def build_validation_data_loader(self) -> pytorch.DataLoader:
        return pytorch.DataLoader(Ones(), batch_size=self.context.get_per_slot_batch_size())

    def train_batch(self, batch: Any, epoch_idx: int, batch_idx: int) -> dict[str, Any]:
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.model(x), y)
        self.context.backward(loss)
        self.context.step_optimizer(self.opt)
        return {"loss": loss}

    def evaluate_batch(self, batch: Any, batch_idx: int) -> dict[str, Any]:
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.model(x), y)
        return {"val_loss": loss, "w": self.model.weight.detach().reshape(())}
