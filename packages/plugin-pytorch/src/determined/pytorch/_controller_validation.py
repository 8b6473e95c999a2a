"""The validation steps of the trial controller, and the collector of ``evaluate_batch`` metrics.

``ValidationSteps`` is a base of :class:`~determined.pytorch.extension.PyTorchTrialController`:
one validation (callbacks, evaluation, reducers, reporting, TensorBoard, checkpoint policy) around
the overridable :meth:`ValidationSteps.evaluate_batches` / :meth:`evaluate_full_dataset`.
``ValidationCollector`` is what those steps share with a framework plugin's: it checks and keeps the
metrics of each evaluated batch and reduces them over every rank.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from determined.pytorch import _metrics
from determined.pytorch._controller_checkpoints import CheckpointSteps

if TYPE_CHECKING:
    from determined.core import DistributedContext
    from determined.pytorch._callback import PyTorchCallback
    from determined.pytorch._reducer import Reducer


class ValidationCollector:
    """Collects the metrics of one validation pass, batch by batch, and reduces them.

    Every ``evaluate_batch`` result must be a dict with the same names each time; tensors are
    detached and moved to the CPU. :meth:`finish` calls the callbacks' ``on_validation_epoch_end``
    and reduces over all ranks (a collective: every rank calls it).
    """

    def __init__(self, dist: DistributedContext, callbacks: dict[str, PyTorchCallback]) -> None:
        self._dist = dist
        self._callbacks = callbacks
        self._keys: set[str] | None = None
        self.outputs: list[dict[str, Any]] = []
        self.lengths: list[int] = []

    def check(self, out: Any) -> dict[str, Any]:
        """``out`` if it is a dict with this pass's metric names; an error otherwise."""
        if not isinstance(out, dict):
            raise TypeError(
                f"evaluate_batch() must return a dict of metrics, not {type(out).__name__}"
            )
        if self._keys is None:
            self._keys = set(out)
        elif self._keys != set(out):
            raise ValueError(
                "evaluate_batch() must return the same metric names for every batch: "
                f"{sorted(self._keys)} != {sorted(out)}"
            )
        return out

    def add(self, out: Any, length: int) -> None:
        """Check and keep one batch's metrics; ``length`` (its samples) weighs it in averages."""
        out = self.check(out)
        self.outputs.append(
            {k: v.detach().cpu() if isinstance(v, torch.Tensor) else v for k, v in out.items()}
        )
        self.lengths.append(length)

    def finish(self, reducer: Reducer | dict[str, Reducer]) -> dict[str, Any] | None:
        """The metrics reduced with ``reducer`` (the trial's ``evaluation_reducer()``): on the
        chief; ``None`` elsewhere."""
        if self._dist.size == 1 and not self.outputs:
            raise RuntimeError("build_validation_data_loader(): the validation data is empty")
        for callback in self._callbacks.values():
            callback.on_validation_epoch_end(self.outputs)
        return _metrics.reduce_validation(
            self._dist, list(zip(self.outputs, self.lengths, strict=True)), reducer
        )


class ValidationSteps(CheckpointSteps):
    """Validating the trial: the validation half of the trial controller (built on the checkpoint
    steps, which a validation may trigger)."""

    eval_mode: str
    eval_takes_batch_idx: bool
    test_mode: bool
    checkpoint_policy: str
    smaller_is_better: bool
    searcher_metric_name: str | None
    validation_loader: Any
    _local_best: float | None

    def validation_is_current(self) -> bool:
        """Whether the trial was validated at the current batch."""
        return self.state.last_val == self.state.batches_trained

    @torch.no_grad()
    def validate(self) -> dict[str, Any]:
        """Validate, report the metrics and checkpoint as ``checkpoint_policy`` says; return the
        metrics (on every rank)."""
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
            metrics = self.evaluate_batches()
        else:
            metrics = self.evaluate_full_dataset() if self.is_chief else None
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
            self.log_tensorboard("val", metrics)
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
            if not self.checkpoint_is_current():
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
            self.save_checkpoint(already_exiting=False)
        return metrics

    def evaluate_batches(self) -> dict[str, Any] | None:
        """Run ``evaluate_batch`` over this rank's validation data (``eval_mode == "batch"``);
        return the metrics reduced over all ranks on the chief, ``None`` elsewhere."""
        trial, ctx = self.trial, self.context
        for callback in self.callbacks.values():
            callback.on_validation_epoch_start()
        collector = ValidationCollector(self.dist, self.callbacks)
        for idx, batch in enumerate(self.validation_loader):
            if ctx.experimental._auto_to_device:
                batch = ctx.to_device(batch)
            length = trial.get_batch_length(batch)
            if self.eval_takes_batch_idx:
                out = trial.evaluate_batch(batch=batch, batch_idx=idx)
            else:
                out = trial.evaluate_batch(batch=batch)
            collector.add(out, length)
            if self.test_mode:
                break
        return collector.finish(trial.evaluation_reducer())

    def evaluate_full_dataset(self) -> dict[str, Any]:
        """Run ``evaluate_full_dataset`` on the chief (``eval_mode == "full"``)."""
        metrics = self.trial.evaluate_full_dataset(data_loader=self.validation_loader)
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

    def log_tensorboard(self, kind: str, metrics: dict[str, Any]) -> None:
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
