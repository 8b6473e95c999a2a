"""TrainContext: report metrics, progress and status; read and write run metadata."""

from __future__ import annotations

import enum
import logging
import math
import pathlib
import shutil
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from determined.core import _metrics

if TYPE_CHECKING:
    from determined.core._api import TrialAPI
    from determined.core._tensorboard import TensorboardMode, TensorboardSync
    from determined.core._tensorboard_events import MetricEventWriter

logger = logging.getLogger("determined.core")


class EarlyExitReason(enum.Enum):
    """Why a trial ended before its searcher asked it to."""

    INVALID_HP = "EXITED_REASON_INVALID_HP"
    USER_REQUESTED_STOP = "EXITED_REASON_USER_REQUESTED_STOP"


class TrainContext:
    """Training-side reporting for one trial.

    ``report_*_metrics`` return at once: a background thread ships reports in batches, and a failure
    surfaces on the next report or when the context closes.
    """

    def __init__(
        self,
        backend: TrialAPI,
        *,
        trial_id: int,
        run_id: int,
        exp_id: int,
        tensorboard_mode: TensorboardMode,
        tensorboard_path: pathlib.Path,
        tensorboard_sync: TensorboardSync | None = None,
    ) -> None:
        from determined.client import metrics_body

        self._backend = backend
        self._trial_id = trial_id
        self._run_id = run_id
        self._exp_id = exp_id
        self._tensorboard_mode = tensorboard_mode
        self._tensorboard_path = tensorboard_path
        self._tensorboard_sync = tensorboard_sync
        self._event_writer: MetricEventWriter | None = None

        def send(reports: list[_metrics.MetricsReport]) -> None:
            bodies = [
                metrics_body(
                    trial_id,
                    run_id,
                    r.group,
                    r.metrics,
                    r.steps_completed,
                    r.batch_metrics,
                    r.report_time_iso(),
                )
                for r in reports
            ]
            backend.report_trial_metrics_batch(trial_id, bodies)
            # AUTO: the metrics become TensorBoard scalars and the files follow them (uploaded at
            # most once a second), on this background thread, so a report stays cheap.
            self._write_tensorboard_events(reports)
            self._sync_tensorboard()

        self._shipper = _metrics.MetricsShipper(send)

    def report_training_metrics(
        self,
        steps_completed: int,
        metrics: dict[str, Any],
        batch_metrics: list[dict[str, Any]] | None = None,
    ) -> None:
        """Report training metrics (group ``training``) at ``steps_completed``."""
        self._shipper.report("training", metrics, steps_completed, batch_metrics)

    def report_validation_metrics(self, steps_completed: int, metrics: dict[str, Any]) -> None:
        """Report validation metrics (group ``validation``); the searcher reads its metric from them."""
        self.report_metrics("validation", steps_completed, metrics)

    def report_metrics(self, group: str, steps_completed: int, metrics: dict[str, Any]) -> None:
        """Report metrics of any group (e.g. ``"inference"``) at ``steps_completed``."""
        if not isinstance(group, str) or not group or "." in group:
            raise ValueError(f"group: must be a non-empty string without '.', got {group!r}")
        if not isinstance(metrics, dict):
            raise TypeError(f"metrics: must be a dict, got {type(metrics).__name__}")
        if group == "validation":
            cleaned = {}
            for name, value in metrics.items():
                if value is None:
                    raise RuntimeError(f"validation metric {name!r} is None")
                if isinstance(value, bytes):
                    logger.warning("dropping validation metric %r: bytes cannot be reported", name)
                    continue
                cleaned[name] = value
            metrics = cleaned
        self._shipper.report(group, metrics, steps_completed)

    def report_progress(self, progress: float) -> None:
        """Report training progress in [0, 1] (shown by the web UI and ``det e list``)."""
        progress = float(progress)
        if math.isnan(progress) or not 0.0 <= progress <= 1.0:
            raise ValueError(f"progress: must be between 0 and 1, got {progress}")
        self._backend.report_progress(self._trial_id, progress)

    def set_status(self, status: str) -> None:
        """Show a short status text for this trial."""
        self._backend.set_runner_status(self._trial_id, str(status))

    def report_early_exit(self, reason: EarlyExitReason) -> None:
        """Tell the master this trial is ending early (e.g. invalid hyperparameters)."""
        if not self._backend.report_early_exit(self._trial_id, EarlyExitReason(reason).value):
            logger.warning("an early exit was already reported for this trial")

    def get_experiment_best_validation(self) -> float | None:
        """The best searcher-metric value across the experiment so far (``None`` if none yet)."""
        self._shipper.flush()
        return self._backend.get_best_searcher_validation_metric(self._exp_id)

    def set_metadata(self, metadata: dict[str, Any]) -> dict[str, Any] | None:
        """Replace this run's metadata."""
        return self._backend.set_run_metadata(self._trial_id, metadata)

    def get_metadata(self) -> dict[str, Any] | None:
        return self._backend.get_run_metadata(self._trial_id)

    @property
    def tensorboard_mode(self) -> TensorboardMode:
        """Who uploads TensorBoard files: det (AUTO) or the caller of ``upload_tensorboard_files``."""
        return self._tensorboard_mode

    def get_tensorboard_path(self) -> pathlib.Path:
        """The local directory for TensorBoard event files (created on first call)."""
        self._tensorboard_path.mkdir(parents=True, exist_ok=True)
        return self._tensorboard_path

    def upload_tensorboard_files(
        self,
        selector: Callable[[str], bool] = lambda _: True,
        mangler: Callable[[str, int], str] = lambda path, _rank: path,
    ) -> None:
        """Upload TensorBoard files (MANUAL mode only), renaming each with ``mangler(path, rank)``."""
        from determined.core._tensorboard import TensorboardMode

        if self._tensorboard_mode != TensorboardMode.MANUAL:
            raise RuntimeError(
                "upload_tensorboard_files() is only allowed with tensorboard_mode=MANUAL"
            )
        if self._tensorboard_sync is not None:
            self._tensorboard_sync.sync(selector, mangler)

    def _write_tensorboard_events(self, reports: list[_metrics.MetricsReport]) -> None:
        """AUTO mode: training and validation reports as scalars in an event file (upstream's)."""
        from determined.core._tensorboard import TensorboardMode
        from determined.core._tensorboard_events import MetricEventWriter

        if self._tensorboard_mode != TensorboardMode.AUTO or self._tensorboard_sync is None:
            return  # off-cluster nothing uploads them
        try:
            if self._event_writer is None:
                self._event_writer = MetricEventWriter(self._tensorboard_path)
            for r in reports:
                if r.steps_completed is None:
                    continue
                if r.group == "training":
                    self._event_writer.on_training(r.steps_completed, r.metrics, r.batch_metrics)
                elif r.group == "validation":
                    self._event_writer.on_validation(r.steps_completed, r.metrics)
        except Exception as exc:
            logger.warning("writing metrics to TensorBoard failed: %s", exc)

    def _sync_tensorboard(self, force: bool = False) -> bool:
        """AUTO mode: upload what changed; True when every local file is now in storage."""
        from determined.core._tensorboard import TensorboardMode

        if self._tensorboard_mode == TensorboardMode.AUTO and self._tensorboard_sync is not None:
            try:
                self._tensorboard_sync.sync(force=force)
                return True
            except Exception as exc:
                logger.warning("tensorboard upload failed: %s", exc)
        return False

    def _start(self) -> None:
        self._shipper.start()

    def _close(self) -> None:
        try:
            self._shipper.close()
        finally:
            if self._sync_tensorboard(force=True) and self._tensorboard_sync is not None:
                # Everything is in storage: the local directory was det's temporary copy, and
                # processes (unlike upstream's containers) leave /tmp behind them.
                shutil.rmtree(self._tensorboard_sync.local_path, ignore_errors=True)
