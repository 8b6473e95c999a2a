"""The bookkeeping between batches of the trial controller: periods, schedulers, reports, stops.

``PeriodSteps`` is a base of :class:`~determined.pytorch.extension.PyTorchTrialController` (on top
of its validation and checkpoint steps): which period boundaries a batch reached, when the next one
can fire, stepping the wrapped LR schedulers, reporting a period's training metrics and progress,
the stop/preemption check at a boundary, and the TensorBoard upload. The per-batch loop itself stays
in ``_controller`` and calls none of this between two boundaries.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable

from determined import core
from determined.pytorch import _metrics
from determined.pytorch._controller_validation import ValidationSteps
from determined.pytorch._lr_scheduler import LRScheduler
from determined.pytorch._units import Batch, Epoch, ShouldExit, TrainUnit

TRAIN, VALIDATE, CHECKPOINT, REPORT = "TRAIN", "VALIDATE", "CHECKPOINT", "REPORT"
PROGRESS_INTERVAL_S = 2.0


class PeriodSteps(ValidationSteps):
    """Period boundaries, scheduler steps, metric and progress reports of the trial controller."""

    max_length: TrainUnit
    boundaries: list[tuple[str, TrainUnit]]
    _needs_workload_broadcast: bool
    _next_progress: float

    def _remaining(self, unit: TrainUnit) -> int:
        assert isinstance(unit.value, int)
        done = self.state.batches_trained if isinstance(unit, Batch) else self.state.epochs_trained
        return unit.value - done

    def fired_boundaries(self, done: int, epoch_idx: int, epoch_end: bool) -> list[str]:
        """The boundaries reached after ``done`` batches (``epoch_end``: the batch ended epoch
        ``epoch_idx``)."""
        return [
            kind
            for kind, unit in self.boundaries
            if (
                unit.should_stop(done)
                if type(unit) is not Epoch
                else epoch_end and unit.should_stop(epoch_idx + 1)
            )
        ]

    def _next_batch_boundary(self, done: int) -> int:
        """The first batch count after ``done`` at which a Batch period may fire (Epoch periods
        are checked at epoch ends): the loop compares one integer per batch."""
        candidates = []
        for _, unit in self.boundaries:
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

    def step_schedulers(self, schedulers: list[LRScheduler], batch_idx: int) -> None:
        """Step the wrapped LR schedulers per their step mode after batch ``batch_idx``."""
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
        raw, self.batch_metrics = self.batch_metrics, []
        batch_metrics = _metrics.batch_metrics_to_python(raw)
        if self.dist.size > 1:
            gathered = self.dist.gather(batch_metrics)
            batch_metrics = _metrics.average_across_ranks(gathered) if gathered else []
        avg = _metrics.average_metrics(batch_metrics) if self.is_chief else {}
        reduced = self.context.reduce_metrics(for_training=True)
        self.context.reset_reducers()
        avg.update(_metrics.to_python(reduced))
        if self.is_chief and batch_metrics:
            self.log_tensorboard("train", avg)
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
            raise ShouldExit()

    def _upload_tensorboard(self) -> None:
        self.context._maybe_reset_tbd_writer()
        if self.core.info is None:
            return
        if self.core.train.tensorboard_mode != core.TensorboardMode.MANUAL:
            return
        rank = self.dist.rank
        self.core.train.upload_tensorboard_files(
            (lambda _: True) if self.is_chief else (lambda p: "tfevents" not in p),
            lambda path, _rank: path if rank == 0 else f"rank_{rank}/{path}",
        )
