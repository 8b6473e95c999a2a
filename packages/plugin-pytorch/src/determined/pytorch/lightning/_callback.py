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
import logging
import math
import signal
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import Checkpoint
from pytorch_lightning.trainer.states import TrainerFn

from determined.pytorch.lightning import _rng
from determined.pytorch.lightning._checkpoints import (
    CHECKPOINT_FILE,
    fetch_checkpoint,
    store_checkpoint,
)
from determined.pytorch.lightning._logger import DetLogger
from determined.pytorch.lightning._metric_ranking import MetricRanking
from determined.pytorch.lightning._searcher_progress import SearcherProgress

if TYPE_CHECKING:
    import determined as det

logger = logging.getLogger("determined.pytorch.lightning")

__all__ = ["CHECKPOINT_FILE", "CHECKPOINT_POLICIES", "DetCallback"]

CHECKPOINT_POLICIES = ("best", "all", "none")


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
        if smaller_is_better is None:
            smaller_is_better = bool(searcher.get("smaller_is_better", True))
        self._ranking = MetricRanking(
            searcher_metric or searcher.get("metric"), smaller_is_better, self._on_cluster
        )
        self._is_chief = core_context.distributed.rank == 0
        self._resume = contextlib.ExitStack()
        self._last_saved_step: int | None = None
        self._preempted = False
        self._stop_at_epoch_end = False
        self._save_at_epoch_end = False
        self._saving_at_epoch_end = False
        self._mid_epoch_rng: dict[str, Any] | None = None
        self._rng_before_validation: torch.Tensor | None = None
        self._searcher = SearcherProgress(core_context, self._is_chief)
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
        ckpt_path: str = fetch_checkpoint(self._core, self._latest_checkpoint, self._resume)
        return ckpt_path

    # ---- Lightning's checkpoint state ------------------------------------------------------------
    @property
    def state_key(self) -> str:
        return "DetCallback"

    def state_dict(self) -> dict[str, Any]:
        return {
            "rng": _rng.capture(),
            "epoch_end": self._saving_at_epoch_end,
            "best": self._ranking.best,
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._ranking.best = state_dict.get("best")
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
        if self._on_cluster and self._ranking.metric:
            self._searcher.start()

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
        if self._policy == "best" and self._on_cluster and self._ranking.metric:
            # Before this validation is reported, so it can be compared with it.
            self._ranking.experiment_best = self._core.train.get_experiment_best_validation()

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not _fitting(trainer):
            return
        if self._rng_before_validation is not None:
            torch.set_rng_state(self._rng_before_validation)
        metric = self._ranking.value(trainer)
        wants_checkpoint = self._policy == "all" or (
            self._policy == "best" and self._ranking.improves(metric)
        )
        self._ranking.record(metric)
        self._searcher.advance(trainer, metric)
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
            self._searcher.close()
            return
        if self._is_chief and self._progress != 1.0:
            self._progress = 1.0
            self._core.train.report_progress(1.0)
        if self._searcher.awaits_final_metric:
            self._searcher.complete(self._ranking.value(trainer))
        self._searcher.close()

    def teardown(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        self._resume.close()
        self._searcher.close()

    # ---- helpers ---------------------------------------------------------------------------------
    def _save(self, trainer: pl.Trainer, *, epoch_end: bool) -> None:
        """Write a Lightning checkpoint into det storage (every rank calls in step)."""
        self._saving_at_epoch_end = epoch_end  # read by state_dict() while Lightning saves
        try:
            self._last_saved_step = store_checkpoint(self._core, trainer)
        finally:
            self._saving_at_epoch_end = False

    def _report_progress(self, trainer: pl.Trainer) -> None:
        total = trainer.estimated_stepping_batches
        if isinstance(total, int | float) and math.isfinite(total) and total > 0:
            progress = min(trainer.global_step / total, 1.0)
            if progress != self._progress:
                self._progress = progress
                self._core.train.report_progress(progress)


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
