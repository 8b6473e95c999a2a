"""DetCallback: det checkpoints, preemption, searcher progress and resume for a ``pl.Trainer``.

Built on Lightning's public API only (``Checkpoint`` callback hooks, ``trainer.save_checkpoint``,
``trainer.should_stop``, ``trainer.fit(ckpt_path=...)``) — upstream removed its LightningAdapter
because it called Lightning internals that changed under it.

Where a checkpoint is taken decides whether a resumed run continues exactly:

- at the end of an epoch (``on_train_epoch_end``, after that epoch's validation) Lightning resumes
  at the next epoch with a fresh data iterator, so the run continues exactly once the RNG state
  (stored in the checkpoint by this callback; Lightning stores none) is restored before the
  iterator is created;
- in the middle of an epoch Lightning restores the data position only for data loaders that
  implement ``state_dict``/``load_state_dict`` (e.g. torchdata's ``StatefulDataLoader``).

So on a preemption signal DetCallback checkpoints and stops at once when every training data loader
is resumable, and otherwise at the end of the current epoch. Validation inside ``fit`` is kept off
the training RNG stream (torch's generator is restored after it, as Lightning does for its sanity
check), so validating or not at a step does not change what training draws next.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import logging
import math
import pathlib
import signal
import threading
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import Checkpoint
from pytorch_lightning.trainer.states import TrainerFn

from determined.pytorch.lightning import _rng
from determined.pytorch.lightning._logger import DetLogger, _epochs_completed

if TYPE_CHECKING:
    import determined as det
    from determined.core import SearcherOperation

logger = logging.getLogger("determined.pytorch.lightning")

CHECKPOINT_FILE = "model.ckpt"
"""The Lightning checkpoint inside a det checkpoint (``Module.load_from_checkpoint(dir / this)``)."""

CHECKPOINT_POLICIES = ("best", "all", "none")

_LIGHTNING_VERSION = importlib.metadata.version("pytorch-lightning")


class DetCallback(Checkpoint):
    """Checkpoints to det storage, honours preemption, reports searcher progress, resumes.

    Add it to an ordinary ``pl.Trainer`` (with :class:`DetLogger` for metrics) and resume with
    ``trainer.fit(model, ckpt_path=det_callback.resume_ckpt_path())``.

    Checkpoints hold the Lightning checkpoint as ``model.ckpt`` (load it with
    ``MyModule.load_from_checkpoint``) and det metadata (``steps_completed`` = ``global_step``,
    ``epoch``, ``framework``, ``format``). They are taken after validations as
    ``checkpoint_policy`` says, when preempted, and when training ends.

    Subclassing Lightning's ``Checkpoint`` makes the Trainer treat this as its checkpointing callback:
    it adds no ``ModelCheckpoint`` of its own (pass one explicitly to also keep local copies).

    Args:
        core_context: the context from ``det.core.init()``.
        checkpoint_policy: after a validation, ``"best"`` checkpoints when the searcher metric is
            the best so far (in this experiment on-cluster, in this run off-cluster), ``"all"``
            always, ``"none"`` never (preemption and end-of-training checkpoints are still taken).
        latest_checkpoint: the det checkpoint to resume from; defaults to the ClusterInfo's
            ``latest_checkpoint`` (``None`` off-cluster: pass the storage id of a checkpoint to
            resume a local run).
        searcher_metric: the validation metric that ranks checkpoints and goes to the searcher;
            defaults to the experiment's ``searcher.metric``.
        smaller_is_better: how to rank ``searcher_metric``; defaults to the experiment's
            ``searcher.smaller_is_better`` (else ``True``).
    """

    def __init__(
        self,
        core_context: det.core.Context,
        *,
        checkpoint_policy: str = "best",
        latest_checkpoint: str | None = None,
        searcher_metric: str | None = None,
        smaller_is_better: bool | None = None,
    ) -> None:
        if checkpoint_policy not in CHECKPOINT_POLICIES:
            raise ValueError(
                f"checkpoint_policy: must be one of {', '.join(CHECKPOINT_POLICIES)}, "
                f"got {checkpoint_policy!r}"
            )
        self._core = core_context
        self._policy = checkpoint_policy
        info = core_context.info
        self._on_cluster = info is not None and info.task_type == "TRIAL"
        searcher: Mapping[str, Any] = {}
        if self._on_cluster:
            assert info is not None
            searcher = info.trial.config.get("searcher") or {}
            if latest_checkpoint is None:
                latest_checkpoint = info.latest_checkpoint
        self._latest_checkpoint = latest_checkpoint
        self._metric = searcher_metric or searcher.get("metric")
        if smaller_is_better is None:
            smaller_is_better = bool(searcher.get("smaller_is_better", True))
        self._smaller_is_better = smaller_is_better

        self._is_chief = core_context.distributed.rank == 0
        self._resume = contextlib.ExitStack()
        self._last_saved_step: int | None = None
        self._best: float | None = None  # this trial's best searcher metric (kept in checkpoints)
        self._experiment_best: float | None = None
        self._preempted = False
        self._stop_at_epoch_end = False
        self._save_at_epoch_end = False
        self._stopped_by_searcher = False
        self._saving_at_epoch_end = False
        self._mid_epoch_rng: dict[str, Any] | None = None
        self._rng_before_validation: torch.Tensor | None = None
        self._warned_missing_metric = False
        self._operations: Iterator[SearcherOperation] | None = None
        self._operation: SearcherOperation | None = None
        self._epoch_units = False
        self._sigterm_handler: Any = None
        self._progress: float | None = None

    # ---- resuming --------------------------------------------------------------------------------
    @property
    def latest_checkpoint(self) -> str | None:
        """The det checkpoint (storage id) this run resumes from, if any."""
        return self._latest_checkpoint

    def resume_ckpt_path(self) -> str | None:
        """The local path of the Lightning checkpoint to resume from, for ``trainer.fit(ckpt_path=)``.

        ``None`` for a fresh start. The checkpoint is fetched from det storage and stays available
        until the Trainer's teardown. In a distributed run every rank must call this.
        """
        if self._latest_checkpoint is None:
            return None
        path = self._resume.enter_context(
            self._core.checkpoint.restore_path(self._latest_checkpoint)
        )
        ckpt = pathlib.Path(path) / CHECKPOINT_FILE
        if not ckpt.is_file():
            self._resume.close()
            raise FileNotFoundError(
                f"latest_checkpoint: det checkpoint {self._latest_checkpoint} holds no "
                f"{CHECKPOINT_FILE} (it was not written by DetCallback)"
            )
        logger.info("resuming from det checkpoint %s", self._latest_checkpoint)
        return str(ckpt)

    # ---- Lightning's checkpoint state ------------------------------------------------------------
    @property
    def state_key(self) -> str:
        return "DetCallback"

    def state_dict(self) -> dict[str, Any]:
        return {
            "rng": _rng.capture(),
            "epoch_end": self._saving_at_epoch_end,
            "best": self._best,
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._best = state_dict.get("best")
        rng = state_dict.get("rng")
        if rng is None:
            return
        if state_dict.get("epoch_end"):
            # The next epoch's data iterator is created after this: it must see the saved state.
            _rng.restore(rng)
        else:
            # Lightning re-creates the current epoch's iterator first (drawing from the RNG).
            self._mid_epoch_rng = rng

    # ---- hooks -----------------------------------------------------------------------------------
    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        for trainer_logger in trainer.loggers:
            if isinstance(trainer_logger, DetLogger):
                trainer_logger._bind(trainer)

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if threading.current_thread() is threading.main_thread():
            # det's SIGTERM handler (preemption off-cluster), before Lightning replaces it below.
            self._sigterm_handler = signal.getsignal(signal.SIGTERM)
        if self._latest_checkpoint is not None and trainer.ckpt_path is None:
            logger.warning(
                "det checkpoint %s is not being resumed: pass "
                "ckpt_path=det_callback.resume_ckpt_path() to trainer.fit()",
                self._latest_checkpoint,
            )

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if callable(self._sigterm_handler):
            # Lightning turns SIGTERM into an exception that ends fit() with an error; with det,
            # SIGTERM is a preemption: checkpoint, stop cleanly, resume later. Lightning's
            # teardown puts back the handlers it found.
            signal.signal(signal.SIGTERM, self._sigterm_handler)
        if self._mid_epoch_rng is not None:
            _rng.restore(self._mid_epoch_rng)
            self._mid_epoch_rng = None
        if self._on_cluster and self._metric:
            self._start_operations()

    def on_train_batch_end(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
    ) -> None:
        self._rng_before_validation = torch.get_rng_state()
        step = trainer.global_step
        every = int(getattr(trainer, "log_every_n_steps", 50) or 1)  # set by Trainer(...)
        if self._is_chief and step % every == 0:
            self._report_progress(trainer)
        if self._preempted or not self._core.preempt.should_preempt():
            return
        self._preempted = True
        if trainer.is_last_batch:
            # The epoch ends with this batch: checkpoint after its validation and epoch-end hooks.
            self._stop_at_epoch_end = True
            trainer.should_stop = True
        elif _all_resumable(trainer.train_dataloader):
            logger.info("preempted at step %d: checkpointing and stopping", step)
            self._save(trainer, epoch_end=False)
            trainer.should_stop = True
        else:
            logger.warning(
                "preempted at step %d: stopping at the end of this epoch, since the training data "
                "loader is not resumable mid-epoch (give it state_dict/load_state_dict, e.g. "
                "torchdata's StatefulDataLoader, to stop at once)",
                step,
            )
            self._stop_at_epoch_end = True

    def on_validation_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not _fitting(trainer) or not self._is_chief:
            return
        if self._policy == "best" and self._on_cluster and self._metric:
            # Before this validation is reported, so it can be compared with it.
            self._experiment_best = self._core.train.get_experiment_best_validation()

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not _fitting(trainer):
            return
        if self._rng_before_validation is not None:
            torch.set_rng_state(self._rng_before_validation)
        metric = self._searcher_metric(trainer)
        wants_checkpoint = self._policy == "all" or (
            self._policy == "best" and self._improves(metric)
        )
        if metric is not None and (self._best is None or self._better(metric, self._best)):
            self._best = metric
        self._advance_searcher(trainer, metric)
        if self._preempted and not self._stop_at_epoch_end:
            return  # already checkpointed for the preemption at this step
        if wants_checkpoint:
            if trainer.is_last_batch:
                self._save_at_epoch_end = True  # after the module's on_train_epoch_end
            else:
                self._save(trainer, epoch_end=False)

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self._save_at_epoch_end or self._stop_at_epoch_end:
            self._save(trainer, epoch_end=True)
            self._save_at_epoch_end = False
        if self._stop_at_epoch_end:
            logger.info("preempted: stopping after epoch %d", trainer.current_epoch)
            trainer.should_stop = True

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self._last_saved_step != trainer.global_step:
            self._save(trainer, epoch_end=trainer.is_last_batch)
        if self._preempted:
            self._close_operations()
            return
        if self._is_chief and self._progress != 1.0:
            self._progress = 1.0
            self._core.train.report_progress(1.0)
        if self._operation is not None and self._is_chief:
            metric = self._searcher_metric(trainer)
            if metric is not None:
                self._operation.report_completed(metric)
                self._operation = None
        self._close_operations()

    def teardown(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        self._resume.close()
        self._close_operations()

    # ---- helpers ---------------------------------------------------------------------------------
    def _save(self, trainer: pl.Trainer, *, epoch_end: bool) -> None:
        """Write a Lightning checkpoint into det storage (every rank calls in step)."""
        step = int(trainer.global_step)
        metadata = {
            "steps_completed": step,
            "epoch": int(trainer.current_epoch),
            "format": "pytorch-lightning",
            "framework": f"pytorch-lightning {_LIGHTNING_VERSION}",
            "checkpoint_file": CHECKPOINT_FILE,
        }
        shard = self._core.distributed.size > 1
        self._saving_at_epoch_end = epoch_end
        try:
            with self._core.checkpoint.store_path(metadata, shard=shard) as (path, storage_id):
                # Lightning writes on the global-zero rank only; the others just take part.
                trainer.save_checkpoint(pathlib.Path(path) / CHECKPOINT_FILE, weights_only=False)
        finally:
            self._saving_at_epoch_end = False
        self._last_saved_step = step
        logger.info("checkpoint %s saved at step %d", storage_id, step)

    def _report_progress(self, trainer: pl.Trainer) -> None:
        total = trainer.estimated_stepping_batches
        if isinstance(total, int | float) and math.isfinite(total) and total > 0:
            progress = min(trainer.global_step / total, 1.0)
            if progress != self._progress:
                self._progress = progress
                self._core.train.report_progress(progress)

    def _searcher_metric(self, trainer: pl.Trainer) -> float | None:
        if not self._metric:
            return None
        value = trainer.callback_metrics.get(self._metric)
        if value is None:
            if self._on_cluster:
                raise RuntimeError(
                    f"the searcher metric {self._metric!r} (searcher.metric) was not logged during "
                    f"validation; logged: {sorted(trainer.callback_metrics)}. Log it in "
                    f"validation_step with self.log({self._metric!r}, ...)"
                )
            if not self._warned_missing_metric:
                self._warned_missing_metric = True
                logger.warning(
                    "searcher_metric %r was not logged during validation (logged: %s)",
                    self._metric,
                    sorted(trainer.callback_metrics),
                )
            return None
        return float(value.item() if hasattr(value, "item") else value)

    def _better(self, a: float, b: float) -> bool:
        return a < b if self._smaller_is_better else a > b

    def _improves(self, metric: float | None) -> bool:
        if metric is None:
            if not self._warned_missing_metric:
                self._warned_missing_metric = True
                logger.warning(
                    'checkpoint_policy="best" needs a searcher metric: checkpointing after every '
                    "validation"
                )
            return True
        best = [b for b in (self._best, self._experiment_best) if b is not None]
        return all(self._better(metric, b) or metric == b for b in best)

    def _start_operations(self) -> None:
        """Start the Core API searcher loop (every rank, in step); skipped when it has no length."""
        from determined.core import Unit

        units = self._core.searcher.get_configured_units()
        if units == Unit.RECORDS:
            logger.warning("searcher lengths in records are not supported with Lightning: ignored")
            return
        self._epoch_units = units == Unit.EPOCHS
        operations = self._core.searcher.operations()
        try:
            self._operation = next(operations, None)
        except ValueError as exc:  # the experiment configures no length
            logger.debug("no searcher operations: %s", exc)
            return
        self._operations = operations

    def _advance_searcher(self, trainer: pl.Trainer, metric: float | None) -> None:
        """Complete the searcher operations this run has trained past; stop when none are left."""
        if self._operations is None or metric is None:
            return
        step = _epochs_completed(trainer) if self._epoch_units else trainer.global_step
        while self._operation is not None and step >= self._operation.length:
            if self._is_chief:
                self._operation.report_completed(metric)
            self._operation = next(self._operations, None)
        if self._operation is None:
            self._close_operations()
            if not trainer.should_stop and trainer.global_step < trainer.estimated_stepping_batches:
                logger.info("the searcher needs no more training from this trial: stopping")
                self._stopped_by_searcher = True
                trainer.should_stop = True

    def _close_operations(self) -> None:
        if self._operations is not None:
            close = getattr(self._operations, "close", None)  # a generator: runs its clean-up
            if close is not None:
                close()
            self._operations = None


def _fitting(trainer: pl.Trainer) -> bool:
    return trainer.state.fn == TrainerFn.FITTING and not trainer.sanity_checking


def _all_resumable(loaders: Any) -> bool:
    """Whether every training loader can restore its position (Lightning's resumable interface)."""
    if loaders is None:
        return False
    if isinstance(loaders, Mapping):
        items = list(loaders.values())
    elif isinstance(loaders, list | tuple):
        items = list(loaders)
    else:
        items = [loaders]
    return bool(items) and all(
        callable(getattr(loader, "state_dict", None))
        and callable(getattr(loader, "load_state_dict", None))
        for loader in items
    )
