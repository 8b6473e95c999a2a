"""``DeepSpeedTrial``: the class users subclass to train DeepSpeed engines with det's loop."""

from __future__ import annotations

import abc
import logging
import pathlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import torch
import torch.utils.data

from determined.pytorch import DataLoader, Reducer, data_length

if TYPE_CHECKING:
    from determined.pytorch import PyTorchCallback
    from determined.pytorch.deepspeed._context import DeepSpeedTrialContext

logger = logging.getLogger("determined.pytorch.deepspeed")


class DeepSpeedTrial(metaclass=abc.ABCMeta):
    """Subclass it and implement ``__init__``, ``train_batch``, the two data-loader builders and
    ``evaluate_batch`` (or ``evaluate_full_dataset``).

    In ``__init__(context)`` build the model, create the engine with ``deepspeed.initialize`` and
    register it with ``context.wrap_model_engine``. ``train_batch`` and ``evaluate_batch`` receive
    an *iterator* over this rank's data: take micro batches with ``next(dataloader_iter)``, move
    them with ``context.to_device``, and call ``engine.backward(loss)``/``engine.step()`` (or, for
    a pipeline engine, ``engine.train_batch(dataloader_iter)``). Data loaders yield micro batches
    of ``train_micro_batch_size_per_gpu`` samples.
    """

    @abc.abstractmethod
    def __init__(self, context: DeepSpeedTrialContext) -> None:
        """Build the model engine(s) and wrap them with ``context.wrap_model_engine``."""

    @abc.abstractmethod
    def train_batch(
        self, dataloader_iter: Iterator[Any] | None, epoch_idx: int, batch_idx: int
    ) -> torch.Tensor | dict[str, Any]:
        """Train on one micro batch from ``dataloader_iter``; return the loss or a dict of metrics.

        det calls it ``gradient_accumulation_steps`` times per optimizer step (once after
        ``context.disable_auto_grad_accumulation()`` or for a pipeline engine) with the same
        ``batch_idx``: the number of optimizer steps before this one, counted from the start of
        training and continued exactly after a resume. ``epoch_idx`` is
        ``batch_idx // steps per epoch``. ``dataloader_iter`` is ``None`` on ranks that read no data
        (see ``ModelParallelUnit.should_build_data_loader``).
        """

    @abc.abstractmethod
    def build_training_data_loader(self) -> DataLoader | torch.utils.data.DataLoader:  # type: ignore[type-arg]
        """The training data as micro batches: a ``det.pytorch.DataLoader`` (any loader that
        repeats forever after ``context.disable_dataset_reproducibility_checks()``)."""

    @abc.abstractmethod
    def build_validation_data_loader(self) -> DataLoader | torch.utils.data.DataLoader:  # type: ignore[type-arg]
        """The validation data, as for :meth:`build_training_data_loader` (with a length)."""

    def build_callbacks(self) -> dict[str, PyTorchCallback]:
        """Named ``det.pytorch.PyTorchCallback`` objects; the names key their saved state."""
        return {}

    def evaluate_batch(
        self, dataloader_iter: Iterator[Any] | None, batch_idx: int
    ) -> dict[str, Any]:
        """Validation metrics of one micro batch (a pipeline engine: one ``eval_batch``) taken from
        ``dataloader_iter``; reduced over every batch on every rank by :meth:`evaluation_reducer`
        (``Reducer.AVG`` weights each batch by its samples). ``batch_idx`` may be left out."""
        raise NotImplementedError("override evaluate_batch() or evaluate_full_dataset()")

    def evaluation_reducer(self) -> Reducer | dict[str, Reducer]:
        """How ``evaluate_batch`` metrics are reduced: one Reducer, or one per metric name."""
        return Reducer.AVG

    def evaluate_full_dataset(
        self,
        data_loader: torch.utils.data.DataLoader | None,  # type: ignore[type-arg]
    ) -> dict[str, Any]:
        """Validation metrics over the whole (unsharded) validation set. It runs on every rank,
        so that engines whose forward pass is collective (ZeRO stage 3) work; the chief's result
        is reported."""
        raise NotImplementedError("override evaluate_batch() or evaluate_full_dataset()")

    def get_batch_length(self, batch: Any) -> int:
        """The number of samples in a validation micro batch (override for custom batch types)."""
        return data_length(batch)

    def save(self, context: DeepSpeedTrialContext, path: pathlib.Path) -> None:
        """Write the engines' checkpoints into ``path``; called on every rank so each writes its
        shards. The default saves engine ``i`` under the tag ``model{i}``."""
        for index, engine in enumerate(context.models):
            engine.save_checkpoint(str(path), tag=f"model{index}")

    def load(self, context: DeepSpeedTrialContext, load_path: pathlib.Path) -> None:
        """Restore the engines from ``load_path`` on every rank (the counterpart of :meth:`save`)."""
        for index, engine in enumerate(context.models):
            tag = f"model{index}"
            try:
                loaded, _client_state = engine.load_checkpoint(str(load_path), tag=tag)
            except AssertionError as exc:
                raise RuntimeError(
                    f"DeepSpeed could not load engine {index} from {load_path}/{tag}: {exc!r} "
                    "(was it saved with the same model, ZeRO stage and number of ranks?)"
                ) from exc
            if loaded is None:
                raise RuntimeError(
                    f"DeepSpeed found no checkpoint of engine {index} at {load_path}/{tag}"
                )


def evaluation_kind(trial: DeepSpeedTrial) -> str:
    """``"batch"`` when ``evaluate_batch`` is overridden (upstream always used it), ``"full"`` when
    only ``evaluate_full_dataset`` is; a clear error when neither is."""
    cls = type(trial)
    batch = cls.evaluate_batch is not DeepSpeedTrial.evaluate_batch
    full = cls.evaluate_full_dataset is not DeepSpeedTrial.evaluate_full_dataset
    if batch:
        if full:
            logger.warning(
                "%s defines evaluate_batch() and evaluate_full_dataset(); using evaluate_batch()",
                cls.__name__,
            )
        return "batch"
    if full:
        return "full"
    raise ValueError(f"{cls.__name__}: define evaluate_batch() (or evaluate_full_dataset())")
