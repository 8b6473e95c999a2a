"""The Core API context of an unmanaged run, and the heartbeat that reports its trial's state.

The context is det's ordinary :class:`determined.core.Context` over the master client (metrics,
checkpoints, progress go through the usual report routes, with the user's session instead of an
allocation token). What an unmanaged run adds is its trial's state: the master does not run the
process, so the chief tells it RUNNING at start, sends a heartbeat every minute, and COMPLETED or
ERROR at close (ERROR for an exception, an uncaught exception or a non-zero ``sys.exit``).
"""

from __future__ import annotations

import logging
import sys
import threading
from types import TracebackType
from typing import TYPE_CHECKING, Any

import determined
from determined import core
from determined.core import _hooks
from determined.core._checkpoint import CheckpointContext
from determined.core._experimental import ExperimentalCoreContext
from determined.core._preempt import PreemptContext, PreemptMode
from determined.core._profiler import ProfilerContext
from determined.core._searcher import SearcherContext, parse_max_length
from determined.core._tensorboard import (
    TensorboardMode,
    TensorboardSync,
    default_tensorboard_path,
    trial_sync_path,
)
from determined.core._train import TrainContext
from determined.experimental.core_v2._log_shipper import OutputShipper

if TYPE_CHECKING:
    from determined.client import MasterClient, TrialsClient

logger = logging.getLogger("determined.core")

HEARTBEAT_SECONDS = 60.0
"""How often a running unmanaged trial tells the master it is alive."""


class TrialHeartbeat:
    """Reports an unmanaged trial's state to the master from the chief: RUNNING and a periodic
    heartbeat while it runs, then COMPLETED or ERROR.

    While started it also watches ``sys.excepthook`` and ``sys.exit`` so that a script that dies of
    an uncaught exception, or exits with a non-zero code, is recorded as ERROR even when ``close``
    only runs from ``atexit``.
    """

    def __init__(
        self, trials: TrialsClient, trial_id: int, interval: float = HEARTBEAT_SECONDS
    ) -> None:
        self._trials = trials
        self._trial_id = trial_id
        self._interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._exception: BaseException | None = None
        self._exit_code: Any = None
        self._original_excepthook: Any = None
        self._original_exit: Any = None
        self._excepthook: Any = None
        self._exit_watch: Any = None

    def start(self) -> None:
        """Mark the trial RUNNING and begin the heartbeat."""
        self._patch("STATE_RUNNING")
        self._install_exit_watch()
        self._thread = threading.Thread(
            target=self._beat, name="det-unmanaged-heartbeat", daemon=True
        )
        self._thread.start()

    def close(self, exc_val: BaseException | None = None) -> None:
        """Stop the heartbeat and report the trial's final state."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        self._remove_exit_watch()
        failure = exc_val if exc_val is not None else self._exception
        if isinstance(failure, determined.InvalidHP):
            failure = None  # the trial ended cleanly (its early exit was reported)
        if isinstance(failure, SystemExit) and failure.code in (None, 0):
            failure = None  # sys.exit(0) inside the `with` block is a clean end
        if failure is None and self._exit_code not in (None, 0):
            failure = RuntimeError(f"exit code {self._exit_code}")
        if failure is not None:
            logger.error("unmanaged trial %s failed: %s", self._trial_id, failure)
        self._patch("STATE_ERROR" if failure is not None else "STATE_COMPLETED")

    def _patch(self, state: str | None) -> None:
        self._trials.patch_unmanaged(self._trial_id, state)

    def _beat(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self._patch(None)
            except Exception as exc:
                logger.warning("unmanaged trial heartbeat failed (will retry): %s", exc)

    def _install_exit_watch(self) -> None:
        self._original_excepthook = sys.excepthook
        self._original_exit = sys.exit
        original_hook, original_exit = sys.excepthook, sys.exit

        def excepthook(
            exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None
        ) -> None:
            self._exception = exc
            original_hook(exc_type, exc, tb)

        def exit_watch(code: Any = 0) -> None:
            self._exit_code = code
            original_exit(code)

        sys.excepthook = excepthook
        sys.exit = exit_watch  # type: ignore[assignment]
        self._excepthook, self._exit_watch = excepthook, exit_watch

    def _remove_exit_watch(self) -> None:
        # Put back the originals only if nobody replaced ours in the meantime.
        if self._original_excepthook is not None and sys.excepthook is self._excepthook:
            sys.excepthook = self._original_excepthook
        if self._original_exit is not None and sys.exit is self._exit_watch:
            sys.exit = self._original_exit
        self._original_excepthook = self._original_exit = None


class UnmanagedContext(core.Context):
    """A :class:`determined.core.Context` whose chief also runs the trial's :class:`TrialHeartbeat`,
    and whose output goes to the trial's logs too (:class:`OutputShipper`)."""

    def __init__(
        self,
        *,
        heartbeat: TrialHeartbeat | None,
        output_shipper: OutputShipper | None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self._heartbeat = heartbeat
        self._output_shipper = output_shipper

    def start(self) -> UnmanagedContext:
        first = not self._started
        super().start()
        if first:
            if self._output_shipper is not None:
                self._output_shipper.start()
            if self._heartbeat is not None:
                self._heartbeat.start()
        return self

    def close(
        self,
        exc_type: type[BaseException] | None = None,
        exc_val: BaseException | None = None,
        exc_tb: TracebackType | None = None,
    ) -> None:
        """Send every queued metric, then the trial's final state (after the metrics, so the
        master never sees a COMPLETED trial still reporting)."""
        if self._closed:
            return
        started = self._started
        try:
            super().close(exc_type, exc_val, exc_tb)
        finally:
            try:
                if started and self._output_shipper is not None:
                    self._output_shipper.flush()  # the output lands before the final state
                if started and self._heartbeat is not None:
                    self._heartbeat.close(exc_val)
            finally:
                if started and self._output_shipper is not None:
                    self._output_shipper.close()


def make_unmanaged_context(
    info: determined.ClusterInfo,
    client: MasterClient,
    trials: TrialsClient,
    distributed: core.DistributedContext,
    owns_distributed: bool,
    storage_config: dict[str, Any],
    preempt_mode: PreemptMode,
    tensorboard_mode: TensorboardMode,
) -> UnmanagedContext:
    """The Core API context of an unmanaged trial run described by ``info``."""
    trial = info.trial
    storage_manager = _hooks.checkpoint_storage(storage_config)
    storage_backend_id = distributed.broadcast(
        client.start_run(trial.trial_id, storage_config) if distributed.rank == 0 else None
    )
    tb_path = default_tensorboard_path(info.allocation_id, distributed.rank, info.cluster_id)
    train = TrainContext(
        client,
        trial_id=trial.trial_id,
        run_id=trial._trial_run_id,
        exp_id=trial.experiment_id,
        tensorboard_mode=tensorboard_mode,
        tensorboard_path=tb_path,
        tensorboard_sync=TensorboardSync(
            storage_manager,
            tb_path,
            trial_sync_path(trial.experiment_id, trial.trial_id, info.cluster_id),
            distributed.rank,
        ),
    )
    max_length, units = parse_max_length(dict(trial.config.get("searcher") or {}))
    return UnmanagedContext(
        heartbeat=TrialHeartbeat(trials, trial.trial_id) if distributed.rank == 0 else None,
        output_shipper=OutputShipper(client, info.task_id, distributed.rank),
        checkpoint=CheckpointContext(
            distributed,
            storage_manager,
            client,
            task_id=info.task_id,
            allocation_id=None,  # no allocation: the master did not schedule this run
            storage_backend_id=storage_backend_id,
            require_steps_completed=True,
            on_report=lambda: train._sync_tensorboard(),
        ),
        distributed=distributed,
        # No master preemption for a process the master does not run: SIGTERM only.
        preempt=PreemptContext(
            distributed, _hooks.preemption_sources(None), client, None, preempt_mode
        ),
        train=train,
        # The master runs no searcher for an unmanaged experiment: one operation of max_length.
        searcher=SearcherContext(client, distributed, trial.trial_id, max_length, units),
        profiler=ProfilerContext(
            lambda group, metrics: train._shipper.report(group, metrics),
            info.agent_id,
            distributed.local_rank,
        ),
        experimental=ExperimentalCoreContext(client, trial.trial_id),
        info=info,
        backend=client,
        owns_distributed=owns_distributed,
    )
