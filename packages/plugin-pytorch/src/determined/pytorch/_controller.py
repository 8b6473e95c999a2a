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
"""

from __future__ import annotations

import contextlib
import inspect
import json
import logging
import pathlib
import shutil
import sys
import time
import warnings
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

import torch
import torch.utils.data

import determined as det
from determined import core
from determined.pytorch import _checkpoint, _metrics
from determined.pytorch._callback import PyTorchCallback
from determined.pytorch._data import DataLoader, _dataset_repro_warning, _on_cpu_already
from determined.pytorch._lr_scheduler import LRScheduler
from determined.pytorch._trial import PyTorchTrial, evaluation_mode
from determined.pytorch._units import Batch, Epoch, TrainUnit, _ShouldExit, _TrialState

if TYPE_CHECKING:
    from determined.pytorch._context import PyTorchTrialContext

logger = logging.getLogger("determined.pytorch")

TRAIN, VALIDATE, CHECKPOINT, REPORT = "TRAIN", "VALIDATE", "CHECKPOINT", "REPORT"
PROGRESS_INTERVAL_S = 2.0


def _overrides(callback: PyTorchCallback, name: str) -> bool:
    return getattr(type(callback), name) is not getattr(PyTorchCallback, name)


def _repeat_torch_loader(loader: Any, skip: int, epoch_len: int) -> Iterator[Any]:
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


class _PyTorchTrialController:
    """Runs one PyTorchTrial to ``max_length``; built and run by ``Trainer.fit()``."""

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
        self._check_trial(trial_inst, context)
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
        self.state = _TrialState(trial_id=self.trial_id)
        self._local_best: float | None = None

        self.eval_mode = self._evaluation_mode(trial_inst)
        self.eval_takes_batch_idx = self.eval_mode == "batch" and (
            "batch_idx" in inspect.signature(trial_inst.evaluate_batch).parameters
        )
        self.callbacks = trial_inst.build_callbacks()
        for name, callback in self.callbacks.items():
            if not isinstance(callback, PyTorchCallback):
                raise TypeError(
                    f"build_callbacks(): {name!r} is a {type(callback).__name__}, not a "
                    "det.pytorch.PyTorchCallback"
                )
            if _overrides(callback, "on_checkpoint_end"):
                warnings.warn(
                    "PyTorchCallback.on_checkpoint_end is deprecated: use on_checkpoint_write_end",
                    FutureWarning,
                    stacklevel=2,
                )
        self._needs_workload_broadcast = self.dist.size > 1 and any(
            _overrides(c, "on_training_workload_end") for c in self.callbacks.values()
        )
        # A single process can stop between two reports (its pending metrics go into the
        # checkpoint); custom training reducers hold state we cannot save, so they wait.
        self._stop_every_batch = self.dist.size == 1 and not context._has_reducers(True)
        self._boundaries = [
            (TRAIN, Batch(1) if test_mode else max_length),
            (VALIDATE, validation_period),
            (CHECKPOINT, checkpoint_period),
            (REPORT, reporting_period),
        ]
        self._batch_metrics: list[dict[str, Any]] = []
        self._next_progress = 0.0
        self._train_seed: int | None = None
        self._train_iter: Iterator[Any] | None = None
        self._validation_loader: Any = None

    # ---- set-up -----------------------------------------------------------------------------
    def _check_trial(self, trial_inst: Any, context: Any) -> None:
        """Refuse a trial this loop cannot run (det.pytorch.deepspeed's loop overrides it)."""
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

    def _evaluation_mode(self, trial_inst: Any) -> str:
        """``"batch"`` (evaluate on every rank) or ``"full"`` (on the chief only)."""
        return evaluation_mode(trial_inst)

    def run(self) -> None:
        saved: dict[str, Any] | None = None
        if self.latest_checkpoint is not None:
            logger.info("restoring trial from checkpoint %s", self.latest_checkpoint)
            with self.core.checkpoint.restore_path(self.latest_checkpoint) as path:
                saved = self._read_checkpoint(pathlib.Path(path))
        first_batch = self.state.batches_trained
        with contextlib.ExitStack() as stack:
            for callback in self.callbacks.values():
                callback.on_trial_startup(first_batch, self.latest_checkpoint)
                stack.callback(callback.on_trial_shutdown)
            self._build_loaders()
            stack.callback(self._close_iterator)
            if saved is not None:
                self._apply_checkpoint(saved)
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
        self._train_iter = None  # lets torch shut its worker processes down

    def _build_loaders(self) -> None:
        size, rank = self.dist.size, self.dist.rank
        repro_off = self.context.experimental._data_repro_checks_disabled
        train_data = self.trial.build_training_data_loader()
        skip = self.state.batches_trained
        if isinstance(train_data, DataLoader):
            loader = train_data._get_data_loader(True, skip, size, rank, self._train_seed)
            self._train_seed = train_data._shuffle_seed
            epoch_len = len(loader)
            self._train_iter = iter(loader)
        elif isinstance(train_data, torch.utils.data.DataLoader) and repro_off:
            try:
                epoch_len = len(train_data)
            except TypeError:
                epoch_len = sys.maxsize
            self._train_iter = _repeat_torch_loader(train_data, skip, epoch_len)
        else:
            raise TypeError(_dataset_repro_warning("build_training_data_loader", train_data))
        self.context._epoch_len = int(self.dist.broadcast(epoch_len))
        if self.context._epoch_len < 1:
            raise ValueError("build_training_data_loader(): the training data has no batches")

        validation_data = self.trial.build_validation_data_loader()
        if not isinstance(validation_data, DataLoader) and not (
            isinstance(validation_data, torch.utils.data.DataLoader) and repro_off
        ):
            raise TypeError(_dataset_repro_warning("build_validation_data_loader", validation_data))
        if self.eval_mode == "batch":
            self._validation_loader = (
                validation_data.get_data_loader(False, 0, size, rank)
                if isinstance(validation_data, DataLoader)
                else validation_data
            )
        elif self.is_chief:
            self._validation_loader = (
                validation_data.get_data_loader()
                if isinstance(validation_data, DataLoader)
                else validation_data
            )

    # ---- checkpoints ------------------------------------------------------------------------
    def _read_checkpoint(self, path: pathlib.Path) -> dict[str, Any] | None:
        state_file = _checkpoint.find_state_file(path)
        if state_file is None:
            logger.warning("checkpoint %s has no state_dict.pth; starting fresh", path)
            return None
        checkpoint = _checkpoint.torch_load(state_file)
        if not isinstance(checkpoint, dict):
            raise ValueError(f"{state_file}: expected a dict, found a {type(checkpoint).__name__}")
        saved_state = _checkpoint.read_trial_state(path, checkpoint)
        if saved_state is not None and saved_state.get("trial_id") == self.trial_id:
            self.state = _TrialState.from_dict(saved_state)
            self.state.trial_id = self.trial_id
            if saved_state.get("_legacy_epochs"):
                checkpoint["_det_legacy_epochs"] = True
            data_state = checkpoint.get("det_data_state") or {}
            self._train_seed = data_state.get("train_seed")
            self._batch_metrics = list(data_state.get("pending_batch_metrics") or [])
        else:
            logger.info("checkpoint from another trial: loading its weights, starting at batch 0")
        return checkpoint

    def _apply_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        ctx = self.context
        for callback in self.callbacks.values():
            callback.on_checkpoint_load_start(checkpoint)
        if checkpoint.pop("_det_legacy_epochs", False) and ctx._epoch_len:
            self.state.epochs_trained = self.state.batches_trained // ctx._epoch_len
        models = _listed(checkpoint, "models_state_dict", "model_state_dict", len(ctx.models))
        for model, model_state in zip(ctx.models, models, strict=False):
            _checkpoint.load_model_state(model, model_state)
        optimizers = _listed(
            checkpoint, "optimizers_state_dict", "optimizer_state_dict", len(ctx.optimizers)
        )
        for optimizer, optimizer_state in zip(ctx.optimizers, optimizers, strict=False):
            optimizer.load_state_dict(optimizer_state)
        schedulers = _listed(
            checkpoint, "lr_schedulers_state_dict", "lr_scheduler", len(ctx.lr_schedulers)
        )
        for scheduler, scheduler_state in zip(ctx.lr_schedulers, schedulers, strict=False):
            scheduler.load_state_dict(scheduler_state)
        if "scaler_state_dict" in checkpoint:
            if ctx._scaler is not None:
                ctx._scaler.load_state_dict(checkpoint["scaler_state_dict"])
            else:
                logger.warning("the checkpoint has a GradScaler state but the trial uses none")
        elif ctx._scaler is not None:
            logger.warning("the trial uses a GradScaler but the checkpoint has no scaler state")
        per_rank = checkpoint.get("det_rank_rng_states")
        if isinstance(per_rank, list) and len(per_rank) == self.dist.size:
            _checkpoint.set_rng_state(per_rank[self.dist.rank], self._cuda_index())
        elif "rng_state" in checkpoint:
            _checkpoint.set_rng_state(checkpoint["rng_state"], self._cuda_index())
        else:
            logger.warning("the checkpoint has no RNG state to restore")
        saved_callbacks = checkpoint.get("callbacks") or {}
        for name, callback in self.callbacks.items():
            if name in saved_callbacks:
                callback.load_state_dict(saved_callbacks[name])
            elif _overrides(callback, "load_state_dict"):
                logger.warning("callback %r has state but the checkpoint holds none for it", name)

    def _cuda_index(self) -> int | None:
        device = self.context.device
        return (device.index or 0) if device.type == "cuda" else None

    def _checkpoint_is_current(self) -> bool:
        return self.state.last_ckpt == self.state.batches_trained

    def _validation_is_current(self) -> bool:
        return self.state.last_val == self.state.batches_trained

    def _checkpoint(self, already_exiting: bool) -> None:
        self.state.last_ckpt = self.state.batches_trained
        rank_rng = self.dist.allgather(_checkpoint.get_rng_state(self._cuda_index()))
        try:
            uuid = ""
            if self.is_chief:
                self.core.train.set_status("checkpointing")
                metadata = {
                    "determined_version": det.__version__,
                    "steps_completed": self.state.batches_trained,
                    "framework": f"torch-{torch.__version__}",
                    "format": "pickle",
                }
                with self.core.checkpoint.store_path(metadata) as (path, storage_id):
                    self._save(pathlib.Path(path), rank_rng)
                    uuid = storage_id
            uuid = self.dist.broadcast(uuid)
            for callback in self.callbacks.values():
                callback.on_checkpoint_upload_end(uuid=uuid)
        except det.InvalidHP:
            if not already_exiting:
                self.core.train.report_early_exit(core.EarlyExitReason.INVALID_HP)
                raise _ShouldExit(skip_exit_checkpoint=True) from None
            raise

    def _save(self, path: pathlib.Path, rank_rng: list[dict[str, Any]]) -> None:
        ctx = self.context
        path.mkdir(parents=True, exist_ok=True)
        checkpoint: dict[str, Any] = {
            "models_state_dict": [model.state_dict() for model in ctx.models],
            "optimizers_state_dict": [optimizer.state_dict() for optimizer in ctx.optimizers],
            "lr_schedulers_state_dict": [s.state_dict() for s in ctx.lr_schedulers],
            "callbacks": {name: cb.state_dict() for name, cb in self.callbacks.items()},
            "rng_state": rank_rng[0],
            "det_rank_rng_states": rank_rng,
            "det_trial_state": self.state.to_dict(),
            "det_data_state": {
                "train_seed": self._train_seed,
                "pending_batch_metrics": _metrics.batch_metrics_to_python(self._batch_metrics),
            },
            "det_format": _checkpoint.FORMAT_VERSION,
        }
        if ctx._scaler is not None:
            checkpoint["scaler_state_dict"] = ctx._scaler.state_dict()
        for callback in self.callbacks.values():
            callback.on_checkpoint_save_start(checkpoint)
        torch.save(checkpoint, path / _checkpoint.STATE_FILE)
        trial_cls = type(self.trial)
        try:
            exp_conf: dict[str, Any] | None = ctx.get_experiment_config()
        except ValueError:
            exp_conf = None
        load_data: dict[str, Any] = {
            "trial_type": "PyTorchTrial",
            "experiment_config": exp_conf,
            "hparams": ctx._hparams,
            "trial_cls_spec": f"{trial_cls.__module__}:{trial_cls.__qualname__}",
            "is_trainer": True,
        }
        if ctx._is_pre_trainer:
            load_data.pop("is_trainer")
        (path / "load_data.json").write_text(json.dumps(load_data, default=str))
        if not self.local_training:
            _copy_user_code(pathlib.Path.cwd(), path / "code")
        for callback in self.callbacks.values():
            if _overrides(callback, "on_checkpoint_end"):
                callback.on_checkpoint_end(str(path))
            callback.on_checkpoint_write_end(str(path))

    # ---- the loop ---------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            if (
                self.step_zero_validation
                and self.state.batches_trained == 0
                and self.state.last_val == 0
                and self.latest_checkpoint is None
            ):
                self._validate()
            self._train()
        except _ShouldExit as exc:
            if not exc.skip_exit_checkpoint and not self._checkpoint_is_current():
                self._checkpoint(already_exiting=True)
        except det.InvalidHP:
            if not self._checkpoint_is_current():
                self._checkpoint(already_exiting=True)
            raise

    def _remaining(self, unit: TrainUnit) -> int:
        assert isinstance(unit.value, int)
        done = self.state.batches_trained if isinstance(unit, Batch) else self.state.epochs_trained
        return unit.value - done

    def _train(self) -> None:
        length = Batch(1) if self.test_mode else self.max_length
        for model in self.context.models:
            model.train()
        while self._remaining(length) > 0:
            fired = self._train_workload()
            self._report_workload()
            if self.is_chief and (
                TRAIN in fired or (REPORT in fired and time.monotonic() >= self._next_progress)
            ):
                self._report_progress()
            for kind in fired:
                if kind == VALIDATE:
                    if not self._validation_is_current():
                        self._validate()
                elif kind == CHECKPOINT and not self._checkpoint_is_current():
                    self._checkpoint(already_exiting=False)
            if self.context._enable_tensorboard_logging and self.context._tbd_writer is not None:
                self._upload_tensorboard()
            self._check_stop()
        if not self._validation_is_current():
            self._validate()
        if not self._checkpoint_is_current():
            self._checkpoint(already_exiting=False)

    def _train_workload(self) -> list[str]:
        """Train until a period boundary; return the boundaries that fired."""
        ctx, trial, state = self.context, self.trial, self.state
        assert self._train_iter is not None and ctx._epoch_len is not None
        epoch_len = ctx._epoch_len
        metrics = self._batch_metrics
        auto_to_device = ctx.experimental._auto_to_device
        on_cpu = ctx._on_cpu
        update_scaler = ctx._scaler is not None and ctx.experimental._auto_amp
        schedulers = [
            s for s in ctx.lr_schedulers if s._step_mode != LRScheduler.StepMode.MANUAL_STEP
        ]
        profiler = ctx.profiler
        aggregation = ctx._aggregation_frequency
        stop_every_batch = self._stop_every_batch
        preempt = self.core.preempt
        # single process: should_preempt() is this flag read (plus an acknowledgement when set)
        preempt_signalled = preempt._signal.is_set
        boundaries = self._boundaries
        check_epochs = any(type(unit) is Epoch for _, unit in boundaries)
        next_check = self._next_batch_boundary(state.batches_trained)
        tensor_type = torch.Tensor
        for batch in self._train_iter:
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
                self._step_schedulers(schedulers, batch_idx)
            state.batches_trained = batch_idx + 1
            epoch_end = in_epoch == epoch_len - 1
            if epoch_end:
                for callback in self.callbacks.values():
                    callback.on_training_epoch_end(epoch_idx)
                state.epochs_trained += 1
            if batch_idx + 1 >= next_check or (epoch_end and check_epochs):
                fired = [
                    kind
                    for kind, unit in boundaries
                    if (
                        unit.should_stop(batch_idx + 1)
                        if type(unit) is not Epoch
                        else epoch_end and unit.should_stop(epoch_idx + 1)
                    )
                ]
                next_check = self._next_batch_boundary(batch_idx + 1)
                if fired:
                    return fired
            if (
                stop_every_batch
                and step_boundary
                and (ctx._stop_requested or (preempt_signalled() and preempt.should_preempt()))
            ):
                raise _ShouldExit()
        raise RuntimeError("the training data loader ran out of batches")

    def _next_batch_boundary(self, done: int) -> int:
        """The first batch count after ``done`` at which a Batch period may fire (Epoch periods
        are checked at epoch ends): the loop compares one integer per batch."""
        candidates = []
        for _, unit in self._boundaries:
            if type(unit) is Epoch:
                continue
            value = unit.value
            if isinstance(value, int):
                candidates.append(done + 1 if value < 1 else (done // value + 1) * value)
            elif isinstance(value, Iterable):
                later = [v for v in value if isinstance(v, int) and v > done]
                if later:
                    candidates.append(min(later))
            else:
                return done + 1  # an opaque container: ask it every batch
        return min(candidates, default=sys.maxsize)

    def _step_schedulers(self, schedulers: list[LRScheduler], batch_idx: int) -> None:
        aggregation = self.context._aggregation_frequency
        epoch_len = self.context._epoch_len or sys.maxsize
        for scheduler in schedulers:
            mode, frequency = scheduler._step_mode, scheduler._frequency
            if mode == LRScheduler.StepMode.STEP_EVERY_BATCH:
                for i in range(batch_idx - aggregation + 1, batch_idx + 1):
                    if (i + 1) % frequency == 0:
                        scheduler.step()
            elif mode == LRScheduler.StepMode.STEP_EVERY_OPTIMIZER_STEP:
                if (batch_idx + 1) % frequency == 0:
                    scheduler.step()
            elif mode == LRScheduler.StepMode.STEP_EVERY_EPOCH:
                # step for every epoch that ends before the next optimizer step
                for epoch in range(batch_idx // epoch_len, (batch_idx + aggregation) // epoch_len):
                    if (epoch + 1) % frequency == 0:
                        scheduler.step()

    def _report_workload(self) -> None:
        raw, self._batch_metrics = self._batch_metrics, []
        batch_metrics = _metrics.batch_metrics_to_python(raw)
        if self.dist.size > 1:
            gathered = self.dist.gather(batch_metrics)
            batch_metrics = _metrics.average_across_ranks(gathered) if gathered else []
        avg = _metrics.average_metrics(batch_metrics) if self.is_chief else {}
        reduced = self.context.reduce_metrics(for_training=True)
        self.context.reset_reducers()
        avg.update(_metrics.to_python(reduced))
        if self.is_chief and batch_metrics:
            self._log_tensorboard("train", avg)
            avg.setdefault("batches", self.state.batches_trained)
            avg.setdefault("epochs", self.state.epochs_trained)
            self.core.train.report_training_metrics(
                steps_completed=self.state.batches_trained,
                metrics=avg,
                batch_metrics=batch_metrics,
            )
        if self._needs_workload_broadcast:
            avg, batch_metrics = self.dist.broadcast((avg, batch_metrics))
        for callback in self.callbacks.values():
            callback.on_training_workload_end(avg_metrics=avg, batch_metrics=batch_metrics)

    def _report_progress(self) -> None:
        # a request to the master on a cluster: at most one per interval between reports
        self._next_progress = time.monotonic() + PROGRESS_INTERVAL_S
        assert isinstance(self.max_length.value, int)
        done = (
            self.state.batches_trained
            if isinstance(self.max_length, Batch)
            else self.state.epochs_trained
        )
        self.core.train.report_progress(min(max(done / self.max_length.value, 0.0), 1.0))

    def _check_stop(self) -> None:
        preempted = self.core.preempt.should_preempt()
        stop = self.context._stop_requested
        if self.dist.size > 1:
            stop = any(self.dist.allgather(stop))
        if preempted or stop:
            raise _ShouldExit()

    # ---- validation -------------------------------------------------------------------------
    @torch.no_grad()
    def _validate(self) -> dict[str, Any]:
        ctx = self.context
        if self.is_chief:
            self.core.train.set_status("validating")
        ctx.reset_reducers()
        for model in ctx.models:
            model.eval()
        for callback in self.callbacks.values():
            callback.on_validation_start()
        metrics: dict[str, Any] | None
        if self.eval_mode == "batch":
            metrics = self._evaluate_batches()
        else:
            metrics = self._evaluate_full() if self.is_chief else None
        reduced = _metrics.to_python(ctx.reduce_metrics(for_training=False))
        if self.is_chief:
            assert metrics is not None
            metrics.update(reduced)
        if self.dist.size > 1:
            metrics = self.dist.broadcast(metrics)
        assert metrics is not None
        for callback in self.callbacks.values():
            callback.on_validation_end(metrics)
        self.state.last_val = self.state.batches_trained
        should_checkpoint = False
        if self.is_chief:
            self._log_tensorboard("val", metrics)
            best_before = (
                self.core.train.get_experiment_best_validation()
                if self.checkpoint_policy == "best" and not self.local_training
                else self._local_best
            )
            report = dict(metrics)
            report.setdefault("batches", self.state.batches_trained)
            report.setdefault("epochs", self.state.epochs_trained)
            self.core.train.report_validation_metrics(
                steps_completed=self.state.batches_trained, metrics=report
            )
            if not self._checkpoint_is_current():
                if self.checkpoint_policy == "all":
                    should_checkpoint = True
                elif self.checkpoint_policy == "best":
                    value = self._searcher_metric(metrics)
                    if best_before is None or (
                        value < best_before if self.smaller_is_better else value > best_before
                    ):
                        should_checkpoint = True
                        self._local_best = value
        for model in ctx.models:
            model.train()
        if self.dist.broadcast(should_checkpoint):
            self._checkpoint(already_exiting=False)
        return metrics

    def _evaluate_batches(self) -> dict[str, Any] | None:
        trial, ctx = self.trial, self.context
        for callback in self.callbacks.values():
            callback.on_validation_epoch_start()
        outputs: list[dict[str, Any]] = []
        lengths: list[int] = []
        keys: set[str] | None = None
        for idx, batch in enumerate(self._validation_loader):
            if ctx.experimental._auto_to_device:
                batch = ctx.to_device(batch)
            lengths.append(trial.get_batch_length(batch))
            if self.eval_takes_batch_idx:
                out = trial.evaluate_batch(batch=batch, batch_idx=idx)
            else:
                out = trial.evaluate_batch(batch=batch)  # type: ignore[call-arg]
            if not isinstance(out, dict):
                raise TypeError(
                    f"evaluate_batch() must return a dict of metrics, not {type(out).__name__}"
                )
            if keys is None:
                keys = set(out)
            elif keys != set(out):
                raise ValueError(
                    "evaluate_batch() must return the same metric names for every batch: "
                    f"{sorted(keys)} != {sorted(out)}"
                )
            outputs.append(
                {k: v.detach().cpu() if isinstance(v, torch.Tensor) else v for k, v in out.items()}
            )
            if self.test_mode:
                break
        if self.dist.size == 1 and not outputs:
            raise RuntimeError("build_validation_data_loader(): the validation data is empty")
        for callback in self.callbacks.values():
            callback.on_validation_epoch_end(outputs)
        return _metrics.reduce_validation(
            self.dist, list(zip(outputs, lengths, strict=True)), trial.evaluation_reducer()
        )

    def _evaluate_full(self) -> dict[str, Any]:
        metrics = self.trial.evaluate_full_dataset(data_loader=self._validation_loader)
        if not isinstance(metrics, dict):
            raise TypeError(
                f"evaluate_full_dataset() must return a dict of metrics, not {type(metrics).__name__}"
            )
        return dict(_metrics.to_python(metrics))

    def _searcher_metric(self, metrics: dict[str, Any]) -> float:
        name = self.searcher_metric_name
        if name is None or name not in metrics:
            raise RuntimeError(
                f"checkpoint_policy='best' compares the searcher metric {name!r}, but validation "
                f"returned {sorted(metrics)}"
            )
        value = metrics[name]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise RuntimeError(
                f"the searcher metric {name!r} must be a number, got {type(value).__name__}"
            )
        return float(value)

    # ---- tensorboard ------------------------------------------------------------------------
    def _log_tensorboard(self, kind: str, metrics: dict[str, Any]) -> None:
        """Averaged metrics of each report (upstream also wrote every batch's, at a high per-batch
        cost); validation names get a ``val_`` prefix as upstream."""
        if not self.context._enable_tensorboard_logging:
            return
        writer = self.context.get_tensorboard_writer()
        for name, value in metrics.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            tag = name if kind == "train" or name.startswith("val") else "val_" + name
            writer.add_scalar("Determined/" + tag, value, self.state.batches_trained)

    def _upload_tensorboard(self) -> None:
        self.context._maybe_reset_tbd_writer()
        if self.core.info is None:
            return
        from determined.core._tensorboard import TensorboardMode

        if self.core.train._tensorboard_mode != TensorboardMode.MANUAL:
            return
        rank = self.dist.rank
        self.core.train.upload_tensorboard_files(
            (lambda _: True) if self.is_chief else (lambda p: "tfevents" not in p),
            lambda path, _rank: path if rank == 0 else f"rank_{rank}/{path}",
        )


def _listed(checkpoint: dict[str, Any], key: str, legacy_key: str, count: int) -> list[Any]:
    """The ``key`` list of a checkpoint, or its pre-list single-object ``legacy_key`` form."""
    if legacy_key in checkpoint:
        if key in checkpoint:
            raise ValueError(f"the checkpoint has both {key!r} and {legacy_key!r}")
        if count > 1:
            raise ValueError(
                f"the checkpoint has one {legacy_key!r} but the trial wrapped {count} of them"
            )
        return [checkpoint[legacy_key]]
    values = list(checkpoint.get(key) or [])
    if len(values) != count:
        raise ValueError(
            f"the checkpoint has {len(values)} entries in {key!r} but the trial wrapped {count}; "
            "wrap the same models, optimizers and schedulers, in the same order"
        )
    return values


def _copy_user_code(source: pathlib.Path, target: pathlib.Path) -> None:
    """Copy the trial's code (the experiment's context directory) into the checkpoint."""
    try:
        shutil.copytree(
            source,
            target,
            ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".git", "*.pth", "*.pt"),
            symlinks=True,
        )
    except (OSError, shutil.Error) as exc:
        logger.warning("could not copy the trial's code into the checkpoint: %s", exc)
