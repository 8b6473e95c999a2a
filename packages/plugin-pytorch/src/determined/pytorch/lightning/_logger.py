"""DetLogger: a Lightning ``Logger`` that reports to det through the Core API."""

from __future__ import annotations

import argparse
import json
import logging
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pytorch_lightning as pl
from pytorch_lightning.loggers import Logger
from pytorch_lightning.utilities import rank_zero_only

if TYPE_CHECKING:
    import determined as det

logger = logging.getLogger("determined.pytorch.lightning")


class DetLogger(Logger):
    """Reports what a LightningModule logs (``self.log``/``self.log_dict``) as det metrics.

    Training metrics are reported every time Lightning logs (every ``log_every_n_steps``), as group
    ``training``; the metrics of a validation run as group ``validation`` (``trainer.test()``
    metrics as group ``test``). ``steps_completed`` is ``trainer.global_step``: the number of
    optimizer steps taken. Validation reports get ``batches`` (= ``steps_completed``) and
    ``epochs`` (epochs completed) unless the module logs them itself, so an ASHA searcher with
    ``time_metric: batches`` or ``epochs`` can rank the trial.

    Lightning does not tell a logger which loop a call comes from; :class:`DetCallback` (in the same
    Trainer) tells it. Without a DetCallback every report is a training report.

    Only the chief (rank 0) reports; hyperparameters go to the run's metadata under ``hparams``.

    Args:
        core_context: the context from ``det.core.init()``.
    """

    def __init__(self, core_context: det.core.Context) -> None:
        super().__init__()
        self._core = core_context
        self._trainer: pl.Trainer | None = None
        self._warned_unbound = False

    # ---- Lightning's Logger interface ------------------------------------------------------------
    @property
    def name(self) -> str:
        return "det"

    @property
    def version(self) -> int | str:
        info = self._core.info
        if info is not None and info.task_type == "TRIAL":
            return info.trial.trial_id
        return "local"

    @property
    def experiment(self) -> det.core.Context:
        """The Core API context metrics go to (Lightning's name for a logger's backend)."""
        return self._core

    @rank_zero_only
    def log_hyperparams(
        self, params: Mapping[str, Any] | argparse.Namespace, *args: Any, **kwargs: Any
    ) -> None:
        if self._core.distributed.rank != 0:
            return
        hparams = vars(params) if isinstance(params, argparse.Namespace) else dict(params or {})
        if not hparams:
            return
        metadata = dict(self._core.train.get_metadata() or {})
        metadata["hparams"] = _jsonable(hparams)
        self._core.train.set_metadata(metadata)

    @rank_zero_only
    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        if self._core.distributed.rank != 0:
            return
        group = self._group()
        values = {name: _scalar(value) for name, value in metrics.items()}
        trainer = self._trainer
        if trainer is not None:
            steps_completed = int(trainer.global_step)
        else:
            # Lightning logs a batch's metrics before it counts the batch: step + 1 steps are done.
            steps_completed = int(step) + 1 if step is not None else 0
        if group == "training":
            self._core.train.report_training_metrics(steps_completed, values)
            return
        if group == "validation":
            values.setdefault("batches", steps_completed)
            if trainer is not None:
                values.setdefault("epochs", _epochs_completed(trainer))
        self._core.train.report_metrics(group, steps_completed, values)

    # ---- det -------------------------------------------------------------------------------------
    def _bind(self, trainer: pl.Trainer) -> None:
        """Called by DetCallback.setup(): from now on reports are grouped by the Trainer's loop."""
        self._trainer = trainer

    def _group(self) -> str:
        trainer = self._trainer
        if trainer is None:
            if not self._warned_unbound:
                self._warned_unbound = True
                logger.warning(
                    "DetLogger is used without DetCallback in the Trainer's callbacks: every report "
                    "is a training report (add DetCallback to report validation metrics)"
                )
            return "training"
        if trainer.validating or trainer.sanity_checking:
            return "validation"
        if trainer.testing:
            return "test"
        if trainer.predicting:
            return "predict"
        return "training"


def _epochs_completed(trainer: pl.Trainer) -> int:
    """Whole epochs done: a validation at the last batch of an epoch counts that epoch."""
    epoch = int(trainer.current_epoch)
    return epoch + 1 if trainer.is_last_batch else epoch


def _scalar(value: Any) -> Any:
    if hasattr(value, "item"):
        value = value.item()
    return value


def _jsonable(value: Any) -> Any:
    """``value`` with everything JSON cannot hold turned into its ``repr`` (classes, tensors...)."""
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)
    return value
