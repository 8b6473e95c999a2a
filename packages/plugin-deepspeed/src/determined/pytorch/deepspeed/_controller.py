"""The DeepSpeed training loop: det.pytorch's loop with DeepSpeed's steps, data and checkpoints.

``DeepSpeedTrialController`` subclasses the PyTorchTrial controller of
:mod:`determined.pytorch.extension`, so periods, units, reporting,
validation scheduling, checkpoint policy, preemption, callbacks and TensorBoard behave exactly as in
``det.pytorch.Trainer``. What it replaces:

- data: loaders are built on the ranks the ``ModelParallelUnit`` names and sharded over its
  data-parallel ranks; one training *batch* is one optimizer step, i.e.
  ``gradient_accumulation_steps`` micro batches, and ``train_batch`` receives the iterator;
- indices: ``batch_idx`` counts optimizer steps from the start of training and continues across
  validations, checkpoints and resumes; ``epoch_idx = batch_idx // steps per epoch``. (Upstream
  0.38 restarted ``batch_idx`` at 0 on every workload, passed ``epoch_idx = 0`` and ignored the
  resume offset.)
- checkpoints: every rank writes through its engines (``trial.save``: ZeRO shards included) plus
  its own ``det_state_dict_rank{r}.pth`` (RNG states, callback state, the loop position, wrapped
  optimizers/schedulers); resume restores all of it, so a resumed run ends with the same weights
  as an uninterrupted one.
"""

from __future__ import annotations

import logging
import math
import pathlib
import sys
from collections.abc import Iterator
from typing import Any

import torch

from determined import core
from determined.pytorch import DataLoader, LRScheduler, extension
from determined.pytorch.deepspeed._context import DeepSpeedTrialContext
from determined.pytorch.deepspeed._trial import DeepSpeedTrial, evaluation_kind

logger = logging.getLogger("determined.pytorch.deepspeed")

RANK_STATE_FILE = "det_state_dict_rank{rank}.pth"


class _CountingIterator:
    """An iterator that counts the samples handed out, so validation can weight each
    ``evaluate_batch`` call by the samples it actually consumed."""

    def __init__(self, iterator: Iterator[Any], length_of: Any) -> None:
        self._iterator = iterator
        self._length_of = length_of
        self.records = 0

    def __iter__(self) -> _CountingIterator:
        return self

    def __next__(self) -> Any:
        batch = next(self._iterator)
        self.records += self._length_of(batch)
        return batch


def _loader_length(loader: Any) -> int | None:
    """How many batches ``loader`` yields on this rank (``None`` when it cannot tell)."""
    batch_sampler = getattr(loader, "batch_sampler", None)
    if batch_sampler is not None:
        try:
            return sum(1 for _ in batch_sampler)
        except TypeError:
            pass
    inner = getattr(loader, "loader", None)  # deepspeed's RepeatingLoader wraps a DataLoader
    for candidate in (loader, inner):
        if candidate is None:
            continue
        try:
            return len(candidate)
        except TypeError:
            continue
    return None


def _average_micro_batches(outputs: list[dict[str, Any]]) -> dict[str, Any]:
    """One step's metrics: the mean of its micro batches' metrics (non-numeric: the last value)."""
    names: dict[str, None] = {}
    for out in outputs:
        names.update(dict.fromkeys(out))
    averaged: dict[str, Any] = {}
    for name in names:
        values = [out[name] for out in outputs if name in out and out[name] is not None]
        if not values:
            averaged[name] = None
        elif all(isinstance(v, torch.Tensor) and v.is_floating_point() for v in values):
            try:
                averaged[name] = torch.stack(values).mean(dim=0)
            except RuntimeError:  # shapes or devices differ
                averaged[name] = values[-1]
        elif all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            averaged[name] = math.fsum(values) / len(values)
        else:
            averaged[name] = values[-1]
    return averaged


def _agree_on_lengths(
    dist: core.DistributedContext,
    micro_len: int | None,
    validation_len: int | None,
    gas: int,
    lockstep: bool,
) -> tuple[int, list[int]]:
    """Steps per epoch (from the shortest training loader of all ranks) and every rank's count of
    validation batches; with ``lockstep`` (ZeRO 3, pipelines) every rank runs the fewest."""
    lengths = dist.allgather((micro_len, validation_len))
    train_lengths = [n for n, _ in lengths if n is not None]
    if not train_lengths:
        raise ValueError("no rank built a training data loader (see ModelParallelUnit)")
    if min(train_lengths) != max(train_lengths):
        logger.warning("training loaders differ in length across ranks; using the shortest")
    epoch_len = min(train_lengths) // gas
    if epoch_len < 1:
        raise ValueError(
            f"build_training_data_loader(): {min(train_lengths)} micro batches per epoch is "
            f"fewer than gradient_accumulation_steps ({gas})"
        )
    counts = [n for _, n in lengths if n is not None]
    if lockstep and counts and min(counts) != max(counts):
        logger.warning(
            "validation: ranks hold %s batches; with ZeRO stage 3 or a pipeline every rank must "
            "run the same number, so the last %d batch(es) of some ranks are left out",
            counts,
            max(counts) - min(counts),
        )
    return epoch_len, counts


class DeepSpeedTrialController(extension.PyTorchTrialController):
    """Runs one :class:`DeepSpeedTrial` to ``max_length``; built and run by ``Trainer.fit()``."""

    trial: DeepSpeedTrial
    context: DeepSpeedTrialContext

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        ctx = self.context
        self._gas = ctx.get_num_micro_batches_per_slot()
        self._calls_per_step = (
            1 if ctx._manual_grad_accumulation or ctx.use_pipeline_parallel else self._gas
        )
        self._check_micro_steps = not (ctx._manual_grad_accumulation or ctx.use_pipeline_parallel)
        self._micro_steps_start = 0
        self._validation_calls = 0
        # ZeRO stage 3 and pipelines run collectives in every forward pass: every rank must make
        # the same number of evaluate_batch calls.
        self._lockstep_validation = ctx.use_pipeline_parallel or any(
            int(engine.zero_optimization_stage()) >= 3 for engine in ctx.models
        )
        self._own_rank_state = False

    # ---- what this loop accepts -------------------------------------------------------------
    def check_trial(self, trial_inst: Any, context: Any) -> None:
        if not isinstance(trial_inst, DeepSpeedTrial):
            raise TypeError(
                "trial: expected a det.pytorch.deepspeed.DeepSpeedTrial, not "
                f"{type(trial_inst).__name__}"
            )
        if not isinstance(context, DeepSpeedTrialContext):
            raise TypeError(
                "context: expected the DeepSpeedTrialContext of det.pytorch.deepspeed.init(), not "
                f"{type(context).__name__}"
            )
        if not context.models:
            raise ValueError(
                "the trial wrapped no model engine: call context.wrap_model_engine(engine) in "
                "__init__"
            )

    def evaluation_mode(self, trial_inst: Any) -> str:
        # Both kinds run on every rank here (see DeepSpeedTrial.evaluate_full_dataset); the base
        # loop's "batch" mode is the one that evaluates on every rank.
        self._eval_kind = evaluation_kind(trial_inst)
        return "batch"

    # ---- data -------------------------------------------------------------------------------
    def build_data_loaders(self) -> None:
        """Loaders on the ranks the ModelParallelUnit names, sharded over its data-parallel ranks;
        one epoch is (micro batches per epoch) // gradient_accumulation_steps optimizer steps."""
        ctx, mpu = self.context, self.context._mpu
        repro_off = ctx.experimental._data_repro_checks_disabled
        gas = self._gas
        # every optimizer step consumes gradient_accumulation_steps micro batches
        skip = self.state.batches_trained * gas
        micro_len: int | None = None
        validation_len: int | None = None
        self.train_iter = None
        self.validation_loader = None
        if mpu.should_build_data_loader:
            replicas, rank = mpu.data_parallel_world_size, mpu.data_parallel_rank
            train_data = self.trial.build_training_data_loader()
            if isinstance(train_data, DataLoader):
                self.train_iter, micro_len = self.shard_training_data(
                    train_data, skip, replicas, rank
                )
            elif repro_off and hasattr(train_data, "__iter__"):
                micro_len = _loader_length(train_data)
                self.train_iter = extension.repeat_torch_loader(
                    train_data, skip, micro_len or sys.maxsize
                )
            else:
                raise TypeError(
                    extension.dataset_repro_warning(
                        "build_training_data_loader", train_data, is_deepspeed_trial=True
                    )
                )
            validation_data = self.trial.build_validation_data_loader()
            if not isinstance(validation_data, DataLoader) and not (
                repro_off and hasattr(validation_data, "__iter__")
            ):
                raise TypeError(
                    extension.dataset_repro_warning(
                        "build_validation_data_loader", validation_data, is_deepspeed_trial=True
                    )
                )
            if self._eval_kind == "full":
                self.validation_loader = (
                    validation_data.get_data_loader()
                    if isinstance(validation_data, DataLoader)
                    else validation_data
                )
            else:
                self.validation_loader = (
                    validation_data.get_data_loader(False, 0, replicas, rank)
                    if isinstance(validation_data, DataLoader)
                    else validation_data
                )
                validation_len = _loader_length(self.validation_loader)
                if validation_len is None:
                    raise TypeError(
                        "build_validation_data_loader(): the validation loader needs a length"
                    )
                if ctx.use_pipeline_parallel:
                    validation_len //= gas  # eval_batch takes gradient_accumulation_steps each
        ctx._epoch_len, counts = _agree_on_lengths(
            self.dist, micro_len, validation_len, gas, self._lockstep_validation
        )
        if self._eval_kind == "batch":
            mine = validation_len or 0
            if self._lockstep_validation:
                mine = min(counts) if counts else 0
            self._validation_calls = mine
        self._micro_steps_start = int(getattr(ctx.models[0], "micro_steps", 0))

    # ---- training ---------------------------------------------------------------------------
    def train_until_boundary(self) -> list[str]:
        """Train optimizer steps until a period boundary; return the boundaries that fired."""
        ctx, trial, state = self.context, self.trial, self.state
        assert ctx._epoch_len is not None
        epoch_len = ctx._epoch_len
        metrics = self.batch_metrics
        report = ctx._mpu.should_report_metrics
        calls, gas = self._calls_per_step, self._gas
        engine = ctx.models[0]
        check_micro_steps = self._check_micro_steps
        schedulers = [
            s for s in ctx.lr_schedulers if s._step_mode != LRScheduler.StepMode.MANUAL_STEP
        ]
        profiler = ctx.profiler
        stop_every_batch = self.stop_every_batch
        preempt = self.core.preempt
        fired_boundaries = self.fired_boundaries
        detach = extension.detach_metrics
        train_iter = self.train_iter
        while True:
            batch_idx = state.batches_trained
            epoch_idx, in_epoch = divmod(batch_idx, epoch_len)
            ctx._current_batch_idx = batch_idx
            if in_epoch == 0:
                for callback in self.callbacks.values():
                    callback.on_training_epoch_start(epoch_idx)
            try:
                if calls == 1:
                    out = detach(trial.train_batch(train_iter, epoch_idx, batch_idx))
                else:
                    out = _average_micro_batches(
                        [
                            detach(trial.train_batch(train_iter, epoch_idx, batch_idx))
                            for _ in range(calls)
                        ]
                    )
            except StopIteration:
                raise RuntimeError(
                    "the training data ran out: a DeepSpeedTrial's training loader must repeat "
                    "forever (det.pytorch.DataLoader does)"
                ) from None
            if check_micro_steps and (engine.micro_steps - self._micro_steps_start) % gas:
                raise RuntimeError(
                    "train_batch must call engine.backward(loss) and engine.step() once per call "
                    f"(once per micro batch): after batch {batch_idx} the engine's micro steps are "
                    f"not a multiple of gradient_accumulation_steps ({gas})"
                )
            if profiler is not None:
                profiler.step()
            if report:
                metrics.append(out)
            if schedulers:
                self.step_schedulers(schedulers, batch_idx)
            state.batches_trained = batch_idx + 1
            epoch_end = in_epoch == epoch_len - 1
            if epoch_end:
                for callback in self.callbacks.values():
                    callback.on_training_epoch_end(epoch_idx)
                state.epochs_trained += 1
            fired = fired_boundaries(batch_idx + 1, epoch_idx, epoch_end)
            if fired:
                return fired
            if stop_every_batch and (ctx._stop_requested or preempt.should_preempt()):
                raise extension.ShouldExit()

    # ---- validation -------------------------------------------------------------------------
    def evaluate_batches(self) -> dict[str, Any] | None:
        """``evaluate_batch`` calls on every rank, each weighted by the samples it consumed; or
        ``evaluate_full_dataset`` on every rank (the chief's result counts)."""
        trial = self.trial
        if self._eval_kind == "full":
            metrics = trial.evaluate_full_dataset(data_loader=self.validation_loader)
            if not isinstance(metrics, dict):
                raise TypeError(
                    "evaluate_full_dataset() must return a dict of metrics, not "
                    f"{type(metrics).__name__}"
                )
            return dict(extension.metrics_to_python(metrics)) if self.is_chief else None
        for callback in self.callbacks.values():
            callback.on_validation_epoch_start()
        report = self.context._mpu.should_report_metrics
        counting = (
            _CountingIterator(iter(self.validation_loader), trial.get_batch_length)
            if self.validation_loader is not None
            else None
        )
        collector = extension.ValidationCollector(self.dist, self.callbacks)
        for idx in range(self._validation_calls):
            before = counting.records if counting is not None else 0
            try:
                if self.eval_takes_batch_idx:
                    out = trial.evaluate_batch(counting, idx)
                else:
                    out = trial.evaluate_batch(counting)  # type: ignore[call-arg]
            except StopIteration:
                raise RuntimeError(
                    f"evaluate_batch() ran out of validation data after {idx} of "
                    f"{self._validation_calls} calls (does each call take one micro batch?)"
                ) from None
            if report:
                consumed = counting.records - before if counting is not None else 0
                collector.add(out, consumed if consumed > 0 else 1)
            else:
                collector.check(out)
            if self.test_mode:
                break
        return collector.finish(trial.evaluation_reducer())

    # ---- checkpoints ------------------------------------------------------------------------
    def read_checkpoint(self, path: pathlib.Path) -> dict[str, Any] | None:
        """This rank's det state (RNG, loop position) and the engines' shards."""
        rank_file = path / RANK_STATE_FILE.format(rank=self.dist.rank)
        self._own_rank_state = rank_file.exists()
        if not self._own_rank_state:
            fallback = path / RANK_STATE_FILE.format(rank=0)
            if fallback.exists():
                logger.warning(
                    "checkpoint %s has no state of rank %d (saved with fewer ranks?): using rank "
                    "0's loop position; this rank's RNG state is not restored",
                    path,
                    self.dist.rank,
                )
                rank_file = fallback
        checkpoint: dict[str, Any] = {}
        if rank_file.exists():
            checkpoint = extension.load_state_file(rank_file)
        else:
            logger.warning("checkpoint %s has no det state: restoring the engines only", path)
        if self.restore_loop_position(path, checkpoint, self._own_rank_state) is None:
            logger.info("checkpoint from another trial: loading its engines, starting at batch 0")
        self.trial.load(self.context, path)
        return checkpoint

    def apply_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        self.notify_checkpoint_load_start(checkpoint)
        self.restore_optimizers_and_schedulers(checkpoint)
        if self._own_rank_state and "rng_state" in checkpoint:
            extension.set_rng_state(checkpoint["rng_state"], self.cuda_index())
        elif self._own_rank_state:
            logger.warning("the checkpoint has no RNG state to restore")
        self.restore_callbacks(checkpoint)

    def save_checkpoint(self, already_exiting: bool) -> None:
        """Every rank writes into one sharded checkpoint (engine shards and its own det state)."""
        metadata = self.begin_checkpoint()
        with self.exit_on_invalid_hp(already_exiting):
            with self.core.checkpoint.store_path(metadata, shard=True) as (path, storage_id):
                self._save_shard(pathlib.Path(path))
            self.notify_checkpoint_uploaded(storage_id)

    def _save_shard(self, path: pathlib.Path) -> None:
        path.mkdir(parents=True, exist_ok=True)
        self.trial.save(self.context, path)
        state: dict[str, Any] = {
            **self.loop_state_dict(),
            "rng_state": extension.get_rng_state(self.cuda_index()),
            "det_world_size": self.dist.size,
        }
        for callback in self.callbacks.values():
            callback.on_checkpoint_save_start(state)
        torch.save(state, path / RANK_STATE_FILE.format(rank=self.dist.rank))
        if self.is_chief:
            self.write_trial_files(path, "DeepSpeedTrial")
        self.notify_checkpoint_written(path)
