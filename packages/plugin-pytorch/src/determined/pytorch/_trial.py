"""``PyTorchTrial``: the class users subclass to train with det's PyTorch loop."""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Any

import torch
import torch.utils.data

from determined.pytorch._data import DataLoader, TorchData, data_length
from determined.pytorch._reducer import Reducer

if TYPE_CHECKING:
    from determined.pytorch._callback import PyTorchCallback
    from determined.pytorch._context import PyTorchTrialContext


class PyTorchTrial(metaclass=abc.ABCMeta):
    """Subclass it and implement ``__init__``, ``train_batch``, the two data-loader builders and
    exactly one of ``evaluate_batch`` or ``evaluate_full_dataset``.

    In ``__init__(context)`` build your models, optimizers and LR schedulers and wrap each with
    ``context.wrap_model`` / ``wrap_optimizer`` / ``wrap_lr_scheduler``. In ``train_batch`` call
    ``context.backward(loss)`` and ``context.step_optimizer(optimizer)``.
    """

    @abc.abstractmethod
    def __init__(self, context: PyTorchTrialContext) -> None:
        """Build and wrap the models, optimizers and LR schedulers."""

    @abc.abstractmethod
    def train_batch(
        self, batch: TorchData, epoch_idx: int, batch_idx: int
    ) -> torch.Tensor | dict[str, Any]:
        """Train on one batch; return the loss tensor or a dict of metrics.

        ``batch_idx`` counts batches since the start of training (it continues after a resume);
        ``epoch_idx`` is ``batch_idx // len(training loader)``.
        """

    @abc.abstractmethod
    def build_training_data_loader(self) -> DataLoader | torch.utils.data.DataLoader:  # type: ignore[type-arg]
        """The training data: a ``det.pytorch.DataLoader`` (a torch DataLoader only after
        ``context.experimental.disable_dataset_reproducibility_checks()``)."""

    @abc.abstractmethod
    def build_validation_data_loader(self) -> DataLoader | torch.utils.data.DataLoader:  # type: ignore[type-arg]
        """The validation data, as for :meth:`build_training_data_loader`."""

    def build_callbacks(self) -> dict[str, PyTorchCallback]:
        """Named callbacks; the names key their saved state in checkpoints."""
        return {}

    def evaluate_batch(self, batch: TorchData, batch_idx: int) -> dict[str, Any]:
        """Validation metrics of one batch (``batch_idx`` may be left out of the signature);
        reduced over every batch on every rank by :meth:`evaluation_reducer`."""
        raise NotImplementedError("override evaluate_batch() or evaluate_full_dataset()")

    def evaluation_reducer(self) -> Reducer | dict[str, Reducer]:
        """How ``evaluate_batch`` metrics are reduced: one Reducer, or one per metric name."""
        return Reducer.AVG

    def evaluate_full_dataset(
        self,
        data_loader: torch.utils.data.DataLoader,  # type: ignore[type-arg]
    ) -> dict[str, Any]:
        """Validation metrics over the whole validation set, computed on the chief only."""
        raise NotImplementedError("override evaluate_batch() or evaluate_full_dataset()")

    def get_batch_length(self, batch: Any) -> int:
        """The number of records in ``batch`` (override for custom batch types)."""
        return data_length(batch)


def evaluation_mode(trial: PyTorchTrial) -> str:
    """Which evaluate method ``trial`` implements: ``"batch"`` or ``"full"``; a clear error unless
    exactly one of them is overridden."""
    cls = type(trial)
    batch = cls.evaluate_batch is not PyTorchTrial.evaluate_batch
    full = cls.evaluate_full_dataset is not PyTorchTrial.evaluate_full_dataset
    if batch == full:
        raise ValueError(
            f"{cls.__name__}: define exactly one of evaluate_batch() (preferred: it runs on every "
            "rank) or evaluate_full_dataset()"
        )
    return "batch" if batch else "full"
