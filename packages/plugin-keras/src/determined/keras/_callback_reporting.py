"""What DeterminedCallback tells det and the log: metrics with counters, status, progress lines.

Status and progress go to the master as synchronous HTTP calls, so :class:`StatusReporter` sends
them at most once a second (the final ones always).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from determined.keras import _compat

if TYPE_CHECKING:
    from determined import core

NOT_METRICS = ("batch", "size")
"""Keys of Keras's batch logs that are counters, not metrics."""
STATUS_INTERVAL = 1.0
"""Seconds between two status or progress calls to the master (unless forced or final)."""


def metrics_with_counters(logs: dict[str, Any] | None, epochs: int, batches: int) -> dict[str, Any]:
    """Keras's logs as plain numbers, plus ``epochs`` and ``batches`` unless the logs have them."""
    metrics = {
        name: _compat.to_python(value)
        for name, value in (logs or {}).items()
        if name not in NOT_METRICS
    }
    metrics.setdefault("epochs", epochs)
    metrics.setdefault("batches", batches)
    return metrics


def validation_metrics(logs: dict[str, Any] | None) -> dict[str, Any]:
    """Validation logs under Keras's ``val_`` names and, unless taken, upstream's plain names."""
    metrics = {}
    for name, value in (logs or {}).items():
        if name in NOT_METRICS:
            continue
        plain = name[4:] if name.startswith("val_") else name
        metrics[f"val_{plain}"] = value
        metrics.setdefault(plain, value)
    return metrics


class StatusReporter:
    """Sends the trial's runner status and progress, throttled to one call a second each."""

    def __init__(self, train: core.TrainContext) -> None:
        self._train = train
        self._last_status: str | None = None
        self._last_status_time = 0.0
        self._last_progress_time = 0.0

    def set_status(self, status: str, force: bool = False) -> None:
        """Send ``status`` if it changed, at most once a second unless ``force``."""
        now = time.monotonic()
        if status == self._last_status:
            return
        if not force and now - self._last_status_time < STATUS_INTERVAL:
            return
        self._last_status, self._last_status_time = status, now
        self._train.set_status(status)

    def report_progress(self, progress: float, final: bool) -> None:
        """Send ``progress`` (0..1), at most once a second unless ``final``."""
        now = time.monotonic()
        if not final and now - self._last_progress_time < STATUS_INTERVAL:
            return
        self._last_progress_time = now
        self._train.report_progress(progress)


class ProgressPrinter:
    """Log-friendly progress lines replacing Keras's progress bar: one every 10% of an epoch."""

    def __init__(self) -> None:
        self._percent_printed = -1

    def restart(self) -> None:
        """A new epoch or validation begins: print from 0% again."""
        self._percent_printed = -1

    def print_progress(
        self,
        logs: dict[str, Any] | None,
        training: bool,
        batches: int,
        total: int | None,
        steps_completed: int,
        epoch: int,
    ) -> None:
        """Print a line when ``batches`` of ``total`` crosses the next 10% mark."""
        if not total:
            return
        tenth = int(batches * 10 / total) * 10
        if tenth <= self._percent_printed:
            return
        self._percent_printed = tenth
        percent = int(batches * 100 / total)
        if training:
            line = (
                f"total batches trained: {steps_completed}, "
                f"epoch {epoch} {percent}% complete ({batches}/{total})"
            )
        else:
            line = (
                f"validation after batch {steps_completed}: {percent}% complete ({batches}/{total})"
            )
        if logs:
            shown = {k: _compat.to_python(v) for k, v in logs.items() if k not in NOT_METRICS}
            line += f": {shown}"
        print(line, flush=True)
