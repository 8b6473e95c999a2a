"""The training loop behind ``Trainer.fit()``: batches, periods, validation, checkpoints, resume.

Per batch the loop does only what a hand-written loop would (move the batch, call ``train_batch``,
step schedulers) plus a few integer comparisons; metrics are detached, not converted, and are
reduced, gathered and reported once per reporting period through core's background shipper. A
single-process trial also checks for preemption after every batch (a flag read); a distributed one
at each period boundary (one broadcast).

Resume is exact: the checkpoint holds the weights, optimizer, scheduler and scaler states, every
rank's Python/NumPy/torch RNG states, the loop position, the shuffle seed, and the batch metrics of
a reporting period cut short by a preemption, so a paused-and-continued trial reports the same
metrics and ends with the same weights as one that ran straight through.

The controller is split by concern: this module holds set-up, data loading and the per-batch loop;
``_controller_periods`` the bookkeeping at period boundaries (reports, schedulers, stop checks),
``_controller_validation`` the validation steps and ``_controller_checkpoints`` the checkpoint
steps. Framework plugins subclass it through :mod:`determined.pytorch.extension`.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import pathlib
import sys
import time
import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import torch
import torch.utils.data

import determined as det
from determined.pytorch import _metrics
from determined.pytorch._callback import PyTorchCallback
from determined.pytorch._controller_checkpoints import callback_overrides
from determined.pytorch._controller_periods import CHECKPOINT, REPORT, TRAIN, VALIDATE, PeriodSteps
from determined.pytorch._data import DataLoader, _on_cpu_already, dataset_repro_warning
from determined.pytorch._lr_scheduler import LRScheduler
from determined.pytorch._trial import PyTorchTrial, evaluation_mode
from determined.pytorch._units import Batch, Epoch, ShouldExit, TrainUnit, TrialState

if TYPE_CHECKING:
    from determined.pytorch._context import PyTorchTrialContext

logger = logging.getLogger("determined.pytorch")


def repeat_torch_loader(loader: Any, skip: int, epoch_len: int) -> Iterator[Any]:
    """A user's torch DataLoader, repeated epoch after epoch, starting ``skip`` batches in."""
    to_skip = skip % epoch_len if 0 < epoch_len < sys.maxsize else skip
    while True:
        produced = False
        for batch in loader:
            produced = True
            if to_skip:
                to_skip -= 1
                continue
            yield batch
        if not produced:
            raise RuntimeError("the training data loader produced no batches")


def checked_callbacks(callbacks: dict[str, Any]) -> dict[str, PyTorchCallback]:
    """``build_callbacks()``'s result, refused unless every value is a PyTorchCallback; warns
    about the deprecated ``on_checkpoint_end``."""
    for name, callback in callbacks.items():
        if not isinstance(callback, PyTorchCallback):
            raise TypeError(
                f"build_callbacks(): {name!r} is a {type(callback).__name__}, not a "
                "det.pytorch.PyTorchCallback"
            )
        if callback_overrides(callback, "on_checkpoint_end"):
            warnings.warn(
                "PyTorchCallback.on_checkpoint_end is deprecated: use on_checkpoint_write_end",
                FutureWarning,
                stacklevel=3,
            )
    return callbacks


class PyTorchTrialController(PeriodSteps):
    """Runs one PyTorchTrial to ``max_length``; built and run by ``Trainer.fit()``.

    A framework plugin subclasses it and overrides the steps that differ (see
    :mod:`determined.pytorch.extension`): :meth:`check_trial`, :meth:`evaluation_mode`,
    :meth:`build_data_loaders`, :meth:`train_until_boundary`, :meth:`evaluate_batches` /
    :meth:`evaluate_full_dataset`, and :meth:`read_checkpoint` / :meth:`apply_checkpoint` /
    :meth:`save_checkpoint`. Attributes those steps share: ``state`` (the loop position),
    ``train_iter`` and ``validation_loader`` (set by ``build_data_loaders``), ``train_seed`` (the
    shuffle seed, checkpointed), ``batch_metrics`` (training metrics not reported yet),
    ``boundaries`` and ``stop_every_batch``.
    """

    def __init__(
        self,
        trial_inst: PyTorchTrial,
        context: PyTorchTrialContext,
        *,
        checkpoint_period: TrainUnit,
        validation_period: TrainUnit,
        reporting_period: TrainUnit,
        max_length: TrainUnit,
        smaller_is_better: bool,
        searcher_metric_name: str | None,
        steps_completed: int,
        latest_checkpoint: str | None,
        local_training: bool,
        test_mode: bool,
        checkpoint_policy: str,
        step_zero_validation: bool,
        profiling_enabled: bool,
        global_batch_size: int | None = None,
    ) -> None:
        self.check_trial(trial_inst, context)
        self.trial = trial_inst
        self.context = context
        self.core = context._core
        self.dist = context.distributed
        self.is_chief = self.dist.rank == 0
        self.max_length = max_length
        self.checkpoint_period = checkpoint_period
        self.validation_period = validation_period
        self.reporting_period = reporting_period
        self.smaller_is_better = smaller_is_better
        self.searcher_metric_name = searcher_metric_name
        self.steps_completed = steps_completed
        self.latest_checkpoint = latest_checkpoint
        self.local_training = local_training
        self.test_mode = test_mode
        self.checkpoint_policy = checkpoint_policy
        self.step_zero_validation = step_zero_validation
        self.profiling_enabled = profiling_enabled
        self.global_batch_size = global_batch_size
        self.trial_id = 0 if local_training else int(self.core.train._trial_id)
        self.state = TrialState(trial_id=self.trial_id)
        self._local_best: float | None = None

        self.eval_mode = self.evaluation_mode(trial_inst)
        self.eval_takes_batch_idx = self.eval_mode == "batch" and (
            "batch_idx" in inspect.signature(trial_inst.evaluate_batch).parameters
        )
        self.callbacks = checked_callbacks(trial_inst.build_callbacks())
        self._needs_workload_broadcast = self.dist.size > 1 and any(
            callback_overrides(c, "on_training_workload_end") for c in self.callbacks.values()
        )
        # A single process can stop between two reports (its pending metrics go into the
        # checkpoint); custom training reducers hold state we cannot save, so they wait.
        self.stop_every_batch = self.dist.size == 1 and not context._has_reducers(True)
        self.boundaries = [
            (TRAIN, Batch(1) if test_mode else max_length),
            (VALIDATE, validation_period),
            (CHECKPOINT, checkpoint_period),
            (REPORT, reporting_period),
        ]
        self.batch_metrics: list[dict[str, Any]] = []
        self._next_progress = 0.0
        self.train_seed: int | None = None
        self.train_iter: Iterator[Any] | None = None
        self.validation_loader: Any = None

    # ---- set-up (overridable) ----------------------------------------------------------------
    def check_trial(self, trial_inst: Any, context: Any) -> None:
        """Refuse a trial this loop cannot run."""
        if not isinstance(trial_inst, PyTorchTrial):
            raise TypeError(
                f"trial: expected a det.pytorch.PyTorchTrial, not {type(trial_inst).__name__}"
            )
        if not context.models:
            raise ValueError("the trial wrapped no model: call context.wrap_model() in __init__")
        if not context.optimizers:
            raise ValueError(
                "the trial wrapped no optimizer: call context.wrap_optimizer() in __init__"
            )

    def evaluation_mode(self, trial_inst: Any) -> str:
        """``"batch"`` (evaluate on every rank) or ``"full"`` (on the chief only)."""
        return evaluation_mode(trial_inst)

    def run(self) -> None:
        saved: dict[str, Any] | None = None
        if self.latest_checkpoint is not None:
            logger.info("restoring trial from checkpoint %s", self.latest_checkpoint)
            with self.core.checkpoint.restore_path(self.latest_checkpoint) as path:
                saved = self.read_checkpoint(pathlib.Path(path))
        first_batch = self.state.batches_trained
        with contextlib.ExitStack() as stack:
            for callback in self.callbacks.values():
                callback.on_trial_startup(first_batch, self.latest_checkpoint)
                stack.callback(callback.on_trial_shutdown)
            self.build_data_loaders()
            stack.callback(self._close_iterator)
            if saved is not None:
                self.apply_checkpoint(saved)
            if self.is_chief and self.context._enable_tensorboard_logging:
                self.context.get_tensorboard_writer()  # import TensorBoard now, not mid-training
            for callback in self.callbacks.values():
                callback.on_training_start()
            if self.profiling_enabled:
                self.core.profiler.on()
                stack.callback(self.core.profiler.off)
            if self.context.profiler is not None:
                stack.enter_context(self.context.profiler)
            self._run()

    def _close_iterator(self) -> None:
        self.train_iter = None  # lets torch shut its worker processes down

    def build_data_loaders(self) -> None:
        """Build the data loaders (after ``read_checkpoint``): set ``train_iter``,
        ``validation_loader`` and ``context._epoch_len`` (batches per epoch)."""
        size, rank = self.dist.size, self.dist.rank
        repro_off = self.context.experimental._data_repro_checks_disabled
        train_data = self.trial.build_training_data_loader()
        skip = self.state.batches_trained
        if isinstance(train_data, DataLoader):
            self.train_iter, epoch_len = self.shard_training_data(train_data, skip, size, rank)
        elif isinstance(train_data, torch.utils.data.DataLoader) and repro_off:
            try:
                epoch_len = len(train_data)
            except TypeError:
                epoch_len = sys.maxsize
            self.train_iter = repeat_torch_loader(train_data, skip, epoch_len)
        else:
            raise TypeError(dataset_repro_warning("build_training_data_loader", train_data))
        self.context._epoch_len = int(self.dist.broadcast(epoch_len))
        if self.context._epoch_len < 1:
            raise ValueError("build_training_data_loader(): the training data has no batches")

        validation_data = self.trial.build_validation_data_loader()
        if not isinstance(validation_data, DataLoader) and not (
            isinstance(validation_data, torch.utils.data.DataLoader) and repro_off
        ):
            raise TypeError(dataset_repro_warning("build_validation_data_loader", validation_data))
        if self.eval_mode == "batch":
            self.validation_loader = (
                validation_data.get_data_loader(False, 0, size, rank)
                if isinstance(validation_data, DataLoader)
                else validation_data
            )
        elif self.is_chief:
            self.validation_loader = (
                validation_data.get_data_loader()
                if isinstance(validation_data, DataLoader)
                else validation_data
            )

    def shard_training_data(
        self, train_data: DataLoader, skip: int, replicas: int, rank: int
    ) -> tuple[Iterator[Any], int]:
        """This rank's shard of a det.pytorch.DataLoader, repeated epoch after epoch and started
        ``skip`` batches in, shuffled with the checkpointed seed (``train_seed``, set here on a
        fresh start); and its batches per epoch."""
        loader = train_data._get_data_loader(True, skip, replicas, rank, self.train_seed)
        self.train_seed = train_data._shuffle_seed
        epoch_len = len(loader)
        return iter(loader), epoch_len

    # ---- the loop ---------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            if (
                self.step_zero_validation
                and self.state.batches_trained == 0
                and self.state.last_val == 0
                and self.latest_checkpoint is None
            ):
                self.validate()
            self._train()
        except ShouldExit as exc:
            if not exc.skip_exit_checkpoint and not self.checkpoint_is_current():
                self.save_checkpoint(already_exiting=True)
            self._upload_final_tensorboard()
        except det.InvalidHP:
            if not self.checkpoint_is_current():
                self.save_checkpoint(already_exiting=True)
            raise

    def _train(self) -> None:
        length = Batch(1) if self.test_mode else self.max_length
        for model in self.context.models:
            model.train()
        while self._remaining(length) > 0:
            fired = self.train_until_boundary()
            self._report_workload()
            if self.is_chief and (
                TRAIN in fired or (REPORT in fired and time.monotonic() >= self._next_progress)
            ):
                self._report_progress()
            for kind in fired:
                if kind == VALIDATE:
                    if not self.validation_is_current():
                        self.validate()
                elif kind == CHECKPOINT and not self.checkpoint_is_current():
                    self.save_checkpoint(already_exiting=False)
            if self.context._enable_tensorboard_logging and self.context._tbd_writer is not None:
                self._upload_tensorboard()
            self._check_stop()
        if not self.validation_is_current():
            self.validate()
        if not self.checkpoint_is_current():
            self.save_checkpoint(already_exiting=False)
        self._upload_final_tensorboard()

    def _upload_final_tensorboard(self) -> None:
        """Upload what the writer holds once more: the loop uploads after each of its boundaries,
        not after the validation and checkpoint that end (or stop) training."""
        if self.context._enable_tensorboard_logging and self.context._tbd_writer is not None:
            self._upload_tensorboard()

    def train_until_boundary(self) -> list[str]:
        """Train batches until a period boundary; return the boundaries that fired
        (``TRAIN``, ``VALIDATE``, ``CHECKPOINT``, ``REPORT``)."""
        ctx, trial, state = self.context, self.trial, self.state
        assert self.train_iter is not None and ctx._epoch_len is not None
        epoch_len = ctx._epoch_len
        metrics = self.batch_metrics
        auto_to_device = ctx.experimental._auto_to_device
        on_cpu = ctx._on_cpu
        update_scaler = ctx._scaler is not None and ctx.experimental._auto_amp
        schedulers = [
            s for s in ctx.lr_schedulers if s._step_mode != LRScheduler.StepMode.MANUAL_STEP
        ]
        profiler = ctx.profiler
        aggregation = ctx._aggregation_frequency
        stop_every_batch = self.stop_every_batch
        preempt = self.core.preempt
        # single process: should_preempt() is this flag read (plus an acknowledgement when set)
        preempt_signalled = preempt._signal.is_set
        boundaries = self.boundaries
        check_epochs = any(type(unit) is Epoch for _, unit in boundaries)
        next_check = self._next_batch_boundary(state.batches_trained)
        tensor_type = torch.Tensor
        for batch in self.train_iter:
            batch_idx = state.batches_trained
            epoch_idx, in_epoch = divmod(batch_idx, epoch_len)
            ctx._current_batch_idx = batch_idx
            if in_epoch == 0:
                for callback in self.callbacks.values():
                    callback.on_training_epoch_start(epoch_idx)
            if auto_to_device and not (on_cpu and _on_cpu_already(batch)):
                batch = ctx.to_device(batch)
            out = trial.train_batch(batch=batch, epoch_idx=epoch_idx, batch_idx=batch_idx)
            if profiler is not None:
                profiler.step()
            step_boundary = (batch_idx + 1) % aggregation == 0
            if update_scaler and step_boundary:
                ctx._scaler.update()
            if type(out) is dict:  # the usual case, inline: this runs once per batch
                for name, value in out.items():
                    if isinstance(value, tensor_type) and value.requires_grad:
                        out[name] = value.detach()
                metrics.append(out)
            else:
                metrics.append(_metrics.detach_metrics(out))
            if schedulers and step_boundary:
                self.step_schedulers(schedulers, batch_idx)
            state.batches_trained = batch_idx + 1
            epoch_end = in_epoch == epoch_len - 1
            if epoch_end:
                for callback in self.callbacks.values():
                    callback.on_training_epoch_end(epoch_idx)
                state.epochs_trained += 1
            if batch_idx + 1 >= next_check or (epoch_end and check_epochs):
                fired = self.fired_boundaries(batch_idx + 1, epoch_idx, epoch_end)
                next_check = self._next_batch_boundary(batch_idx + 1)
                if fired:
                    return fired
            if (
                stop_every_batch
                and step_boundary
                and (ctx._stop_requested or (preempt_signalled() and preempt.should_preempt()))
            ):
                raise ShouldExit()
        raise RuntimeError("the training data loader ran out of batches")


# the name det.pytorch exported before the extension module (kept for compatibility)
_PyTorchTrialController = PyTorchTrialController
