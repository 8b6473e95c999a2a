"""DeterminedCallback: metrics, progress, checkpoints, pausing and resuming for ``model.fit()``.

Differences from upstream's callback (on purpose):

- Public Keras API only (upstream imported private Keras 2 modules and fails on Keras 3); it runs on
  Keras 3 with the TensorFlow, torch or JAX backend and on tf.keras / Keras 2.15.
- Preemption (pause, a searcher's stop, SIGTERM) is checked after every batch in a single process
  (every ``preemption_check_period`` batches with several ranks), not once per epoch, so a pause does
  not wait for the epoch to end. A checkpoint taken inside an epoch resumes at the start of that
  epoch with the weights, optimizer state and batch count of the moment it was taken (Keras's
  ``fit()`` cannot start inside an epoch; its own BackupAndRestore behaves the same way).
- Validation metrics keep Keras's ``val_`` prefix (``val_loss``, as ``fit()`` logs them), so a
  searcher ``metric: val_accuracy`` matches; the unprefixed names upstream reported are sent too, so
  configs written for upstream (``metric: accuracy`` in the validation group) keep working.
- Checkpoint state is JSON (``callback_state.json``), not a pickle; weights are a Keras
  ``model_checkpoint.weights.h5`` file (Keras 3 requires the suffix), loadable with
  ``model.load_weights(<checkpoint dir>/model_checkpoint.weights.h5)``.
- Status and progress calls to the master are throttled to one a second (they are synchronous HTTP
  calls), so very short epochs do not slow training down.
"""

from __future__ import annotations

import logging
import os
import pathlib
import tempfile
from typing import TYPE_CHECKING, Any

from determined.keras import _compat
from determined.keras._callback_arguments import check_callback_arguments
from determined.keras._callback_files import (
    MODEL_FILE,
    OPTIMIZER_FILE,
    STATE_FILE,
    STATE_FORMAT,
    load_optimizer,
    optimizer_values,
    read_state,
    require_built_model,
    write_optimizer,
    write_state,
)
from determined.keras._callback_reporting import (
    ProgressPrinter,
    StatusReporter,
    metrics_with_counters,
    validation_metrics,
)
from determined.keras._compat import keras

if TYPE_CHECKING:
    from determined import core

logger = logging.getLogger("determined.keras")

__all__ = ["MODEL_FILE", "OPTIMIZER_FILE", "STATE_FILE", "STATE_FORMAT", "DeterminedCallback"]


class DeterminedCallback(keras.callbacks.ProgbarLogger):  # type: ignore[misc]
    """Connects ``model.fit()`` to det: metrics, progress, checkpoints, pause and resume.

    Add it to ``fit(callbacks=[...])``. Do not combine it with ``BackupAndRestore`` or
    ``ModelCheckpoint``: it checkpoints and restores by itself. It replaces Keras's progress bar by
    log-friendly lines (every 10% of an epoch) when ``fit(verbose != 0)``.

    Resuming: when ``checkpoint`` names a checkpoint saved with the same ``continue_id``, ``fit()``
    continues after the last epoch the checkpoint holds (the ``initial_epoch`` given to ``fit()`` is
    overridden) and the batch count continues from the checkpoint's ``steps_completed``. With another
    ``continue_id`` it is a warm start: weights and optimizer state are loaded, training starts at
    epoch 0 with ``steps_completed`` 0.

    Args:
        core_context: the context from ``det.core.init()``.
        checkpoint: a checkpoint storage id to start from, or ``None``; on-cluster usually
            ``det.get_cluster_info().latest_checkpoint``.
        continue_id: saved with every checkpoint; on-cluster usually the trial id.
        train_metrics_report_period: ``"epoch"``, or report training metrics every N batches.
        checkpoint_epochs: checkpoint every N epochs; 0 checkpoints only at the end of training and
            when preempted (which always checkpoint).
        preemption_check_period: ask ``core_context.preempt.should_preempt()`` every N batches;
            default 1 in a single process, 10 with several ranks (every rank asks in step).
    """

    def __init__(
        self,
        core_context: core.Context,
        checkpoint: str | None,
        continue_id: int | str,
        *,
        train_metrics_report_period: int | str = "epoch",
        checkpoint_epochs: int = 1,
        preemption_check_period: int | None = None,
    ) -> None:
        # ProgbarLogger is our base only so that fit() adds no progress bar of its own.
        keras.callbacks.Callback.__init__(self)
        # Keras 2's ProgbarLogger answers "call my batch hooks?" from this attribute.
        self._call_batch_hooks = True
        preemption_check_period = check_callback_arguments(
            core_context,
            checkpoint,
            continue_id,
            train_metrics_report_period,
            checkpoint_epochs,
            preemption_check_period,
        )
        self._core = core_context
        self._checkpoint = checkpoint
        self._continue_id = continue_id
        self._report_period = train_metrics_report_period
        self._checkpoint_epochs = checkpoint_epochs
        self._check_period = preemption_check_period
        self._is_chief = core_context.distributed.rank == 0
        self._verbose = False

        self._steps_completed = 0
        self._ckpt_steps = 0  # steps_completed of the latest checkpoint (saved or restored)
        self._last_train_epoch = -1  # the last epoch that ran to its end
        self._resume_epoch: int | None = None
        self._epoch = -1
        self._epoch_batches = 0
        self._since_check = 0
        self._epoch_interrupted = False
        self._preempted = False
        self._in_fit = False
        self._first_epoch_seen = False
        self._training_length: int | None = None
        self._validation_length: int | None = None
        self._validation_batches = 0
        self._status = StatusReporter(core_context.train)
        self._printer = ProgressPrinter()

    # -- what a subclass may change -------------------------------------------------------------

    def save_model(self, model: Any, path: str, distributed: core.DistributedContext) -> None:
        """Write the model into ``path`` (``<checkpoint>/model_checkpoint.weights.h5``).

        Every rank calls it. The chief writes ``path`` with ``model.save_weights``; with several
        ranks the others save into a temporary directory that is deleted at once, because
        MultiWorkerMirroredStrategy needs every worker to take part in saving. Override it to save
        differently; ``load_model`` must match.
        """
        if distributed.rank == 0:
            model.save_weights(path)
            return
        with tempfile.TemporaryDirectory(prefix="det-keras-worker-") as scratch:
            model.save_weights(os.path.join(scratch, pathlib.Path(path).name))

    def load_model(self, model: Any, path: str, distributed: core.DistributedContext) -> None:
        """Load what :meth:`save_model` wrote into ``model`` (every rank calls it)."""
        model.load_weights(path)

    # -- Keras hooks -------------------------------------------------------------------------------

    def set_params(self, params: dict[str, Any]) -> None:
        keras.callbacks.Callback.set_params(self, params)
        self._verbose = params.get("verbose", 0) not in (0, None)

    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        self._in_fit = True
        self._first_epoch_seen = False
        self._preempted = False
        if self._checkpoint is not None:
            self._restore(self._checkpoint)
            self._checkpoint = None  # a second fit() with this callback continues from memory
        if self._resume_epoch is not None:
            _compat.set_initial_epoch(self.model, self._resume_epoch)

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        if not self._first_epoch_seen:
            self._first_epoch_seen = True
            expected = self._resume_epoch
            if expected is not None and epoch != expected:
                raise RuntimeError(
                    f"DeterminedCallback: fit() started at epoch {epoch}, but the checkpoint "
                    f"resumes at epoch {expected}; pass initial_epoch={expected} to fit()"
                )
        self._epoch = epoch
        self._epoch_batches = 0
        self._epoch_interrupted = False
        self._printer.restart()
        if self._is_chief:
            self._status.set_status("training")
            if self._verbose:
                self._print_progress(None, True, 0, self._epoch_length())

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        # With steps_per_execution > 1 Keras calls once per execution, with the last batch's index.
        advance = max(int(batch) + 1 - self._epoch_batches, 1)
        before = self._steps_completed
        self._steps_completed += advance
        self._epoch_batches += advance
        if self._is_chief:
            period = self._report_period
            if isinstance(period, int) and self._steps_completed // period > before // period:
                self._core.train.report_training_metrics(
                    self._steps_completed,
                    metrics_with_counters(logs, self._epoch + 1, self._steps_completed),
                )
            if self._verbose:
                self._print_progress(logs, True, self._epoch_batches, self._epoch_length())
        self._since_check += advance
        if self._since_check < self._check_period:
            return
        self._since_check = 0
        if self._core.preempt.should_preempt():
            self._preempted = True
            self.model.stop_training = True
            length = self._epoch_length()
            self._epoch_interrupted = length is None or self._epoch_batches < length
            if self._epoch_interrupted:
                logger.info(
                    "preempted after %d batches of epoch %d: checkpointing and stopping",
                    self._epoch_batches,
                    self._epoch,
                )

    def on_test_begin(self, logs: dict[str, Any] | None = None) -> None:
        if self._in_fit and self._epoch_interrupted:
            # The epoch was cut short: skip its validation (Keras 3 stops after one batch).
            self.model.stop_evaluating = True
            return
        self._validation_batches = 0
        self._printer.restart()
        if self._is_chief:
            self._status.set_status("validating")
            if self._verbose:
                self._print_progress(None, False, 0, self._validation_length)

    def on_test_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        self._validation_batches += 1
        if self._is_chief and self._verbose and not self._epoch_interrupted:
            self._print_progress(logs, False, self._validation_batches, self._validation_length)

    def on_test_end(self, logs: dict[str, Any] | None = None) -> None:
        if self._in_fit and self._epoch_interrupted:
            return
        self._validation_length = self._validation_batches or self._validation_length
        if not self._is_chief:
            return
        metrics = validation_metrics(logs)
        epochs = self._epoch + 1 if self._in_fit else max(self._last_train_epoch + 1, 0)
        self._core.train.report_validation_metrics(
            self._steps_completed, metrics_with_counters(metrics, epochs, self._steps_completed)
        )

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        if self._epoch_interrupted:
            return  # not a finished epoch: on_train_end checkpoints the batches it did
        self._training_length = self._epoch_batches or self._training_length
        self._last_train_epoch = epoch
        if self._is_chief:
            if self._report_period == "epoch":
                train_only = {k: v for k, v in (logs or {}).items() if not k.startswith("val_")}
                self._core.train.report_training_metrics(
                    self._steps_completed,
                    metrics_with_counters(train_only, epoch + 1, self._steps_completed),
                )
            epochs = self.params.get("epochs") if self.params else None
            if epochs:
                self._status.report_progress(
                    min((epoch + 1) / epochs, 1.0), final=epoch + 1 >= epochs
                )
        if self._checkpoint_epochs > 0 and (epoch + 1) % self._checkpoint_epochs == 0:
            self._save()
        # Checkpointing takes time: look for a preemption after it (and after validation).
        if not self._preempted and self._core.preempt.should_preempt():
            self._preempted = True
            self.model.stop_training = True

    def on_train_end(self, logs: dict[str, Any] | None = None) -> None:
        try:
            if self._steps_completed > self._ckpt_steps:
                self._save()
            if self._is_chief:
                self._status.set_status("finishing", force=True)
        finally:
            self._in_fit = False
            self._resume_epoch = None
            _compat.clear_initial_epoch(self.model)

    # Keras's progress bar for predict() stays off, as it is for fit() and evaluate().
    def on_predict_begin(self, logs: dict[str, Any] | None = None) -> None:
        return None

    def on_predict_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        return None

    def on_predict_end(self, logs: dict[str, Any] | None = None) -> None:
        return None

    # -- checkpoints -------------------------------------------------------------------------------

    def _save(self) -> None:
        """Checkpoint the model, the optimizer and our counters (every rank calls in step)."""
        if self._is_chief:
            self._status.set_status("checkpointing")
        epoch = self._last_train_epoch
        metadata = {"steps_completed": self._steps_completed}
        with self._core.checkpoint.store_path(metadata, shard=True) as (path, _storage_id):
            self.save_model(self.model, str(path / MODEL_FILE), self._core.distributed)
            # Every rank reads the optimizer (reading may take part in a strategy's collectives).
            optimizer = optimizer_values(self.model) if _compat.KERAS_MAJOR < 3 else None
            if self._is_chief:
                if optimizer is not None:
                    write_optimizer(path / OPTIMIZER_FILE, optimizer)
                state = {
                    "epoch": epoch,
                    "steps_completed": self._steps_completed,
                    "continue_id": self._continue_id,
                    "training_length": self._training_length,
                    "validation_length": self._validation_length,
                }
                write_state(path, state)
        self._ckpt_steps = self._steps_completed

    def _restore(self, checkpoint: str) -> None:
        if self._is_chief:
            self._status.set_status("restoring", force=True)
        require_built_model(self.model, checkpoint)
        with self._core.checkpoint.restore_path(checkpoint) as path:
            _compat.build_optimizer(self.model)
            self.load_model(self.model, str(path / MODEL_FILE), self._core.distributed)
            if (path / OPTIMIZER_FILE).exists():
                load_optimizer(self.model, path / OPTIMIZER_FILE)
            state = read_state(path)
        if state and state.get("continue_id") == self._continue_id:
            self._steps_completed = int(state["steps_completed"])
            self._ckpt_steps = self._steps_completed
            self._last_train_epoch = int(state["epoch"])
            self._training_length = state.get("training_length")
            self._validation_length = state.get("validation_length")
            self._resume_epoch = self._last_train_epoch + 1
            logger.info(
                "resuming from checkpoint %s at epoch %d (%d batches trained)",
                checkpoint,
                self._resume_epoch,
                self._steps_completed,
            )
        else:
            self._resume_epoch = None
            logger.info(
                "warm start from checkpoint %s: its weights, training from epoch 0", checkpoint
            )

    # -- helpers -----------------------------------------------------------------------------------

    def _epoch_length(self) -> int | None:
        steps = self.params.get("steps") if self.params else None
        return int(steps) if steps else self._training_length

    def _print_progress(
        self, logs: dict[str, Any] | None, training: bool, batches: int, total: int | None
    ) -> None:
        self._printer.print_progress(
            logs, training, batches, total, self._steps_completed, self._epoch
        )
