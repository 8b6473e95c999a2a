"""``core.init()`` and ``Context``: the entry point of the Core API.

One set of context classes serves both modes. On-cluster they talk to the master through
``determined.client.MasterClient``; off-cluster through ``LocalBackend``, which answers the same calls
locally. Options such as ``preempt_mode`` and ``tensorboard_mode`` behave the same in both modes
(upstream silently dropped them off-cluster).
"""

from __future__ import annotations

import logging
import pathlib
import signal
import sys
import threading
import traceback
from types import TracebackType
from typing import TYPE_CHECKING, Any

import determined
from determined.core import _hooks
from determined.core._checkpoint import CheckpointContext
from determined.core._experimental import ExperimentalCoreContext
from determined.core._local_backend import LocalBackend
from determined.core._preempt import PreemptContext, PreemptMode
from determined.core._profiler import ProfilerContext
from determined.core._searcher import SearcherContext, parse_max_length
from determined.core._tensorboard import (
    TensorboardMode,
    TensorboardSync,
    default_tensorboard_path,
    trial_sync_path,
)
from determined.core._train import EarlyExitReason, TrainContext

if TYPE_CHECKING:
    from determined.core._api import TrialAPI
    from determined.core._distributed import DistributedContext
    from determined.storage import StorageManager

logger = logging.getLogger("determined.core")

_ALERT_LEVELS = {
    "info": "LOG_LEVEL_INFO",
    "warn": "LOG_LEVEL_WARNING",
    "debug": "LOG_LEVEL_DEBUG",
    "error": "LOG_LEVEL_ERROR",
}


class Context:
    """Everything training code needs from det: ``checkpoint``, ``distributed``, ``preempt``, ``train``,
    ``searcher``, ``profiler``, ``experimental`` and ``info`` (the ClusterInfo, or ``None`` off-cluster).

    Use it as a context manager (``with det.core.init() as core_context:``), or call ``start()`` and
    ``close()`` yourself.
    """

    def __init__(
        self,
        *,
        checkpoint: CheckpointContext,
        distributed: DistributedContext,
        preempt: PreemptContext,
        train: TrainContext,
        searcher: SearcherContext,
        profiler: ProfilerContext,
        experimental: ExperimentalCoreContext,
        info: determined.ClusterInfo | None,
        backend: TrialAPI,
        owns_distributed: bool,
    ) -> None:
        self.checkpoint = checkpoint
        self.distributed = distributed
        self.preempt = preempt
        self.train = train
        self.searcher = searcher
        self.profiler = profiler
        self.experimental = experimental
        self.info = info
        self._backend = backend
        self._owns_distributed = owns_distributed
        self._started = False
        self._closed = False

    def start(self) -> Context:
        if not self._started:
            self._started = True
            self.preempt.start()
            self.train._start()
            _install_stack_dump_on_sigusr1()
        return self

    def close(
        self,
        exc_type: type[BaseException] | None = None,
        exc_val: BaseException | None = None,
        exc_tb: TracebackType | None = None,
    ) -> None:
        """Stop watchers, send every queued metric, and release what ``init()`` created.

        A DistributedContext passed in by the caller is left open: it belongs to the caller.
        """
        if self._closed:
            return
        self._closed = True
        try:
            self.preempt.close()
            self.profiler.off()
            self.train._close()
        finally:
            if self._owns_distributed:
                self.distributed.close()
            self._backend.close()

    def __enter__(self) -> Context:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool:
        invalid_hp = exc_type is not None and issubclass(exc_type, determined.InvalidHP)
        if invalid_hp:
            logger.warning("InvalidHP raised: reporting an early exit for invalid hyperparameters")
            try:
                self.train.report_early_exit(EarlyExitReason.INVALID_HP)
            except Exception as exc:
                logger.error("could not report the early exit: %s", exc)
        self.close(exc_type, exc_val, exc_tb)
        # InvalidHP ends the trial cleanly; the interpreter keeps running (upstream called exit(0)).
        return invalid_hp

    def alert(
        self, title: str | None = None, description: str | None = None, level: str = "info"
    ) -> None:
        """Send a custom webhook alert about this trial (on-cluster; logged off-cluster)."""
        if level not in _ALERT_LEVELS:
            raise ValueError(f"level: must be one of {', '.join(_ALERT_LEVELS)}, got {level!r}")
        trial = (
            self.info.trial if self.info is not None and self.info.task_type == "TRIAL" else None
        )
        self._backend.post_custom_webhook(
            trial.experiment_id if trial else 0,
            trial.trial_id if trial else 0,
            title or "",
            description or "",
            _ALERT_LEVELS[level],
        )


def _storage_from_argument(checkpoint_storage: str | dict[str, Any]) -> StorageManager:
    from determined import storage

    if isinstance(checkpoint_storage, str):
        config = storage.to_config(checkpoint_storage)
    elif isinstance(checkpoint_storage, dict):
        config = dict(checkpoint_storage)
    else:
        raise TypeError(
            "checkpoint_storage: must be a path, a storage URL (s3://bucket/prefix, ...) or a dict, "
            f"not {type(checkpoint_storage).__name__}"
        )
    return _hooks.checkpoint_storage(config)


def default_local_storage_path() -> pathlib.Path:
    """Where off-cluster checkpoints go by default: the user data dir (``~/.local/share/determined``)."""
    import platformdirs

    return pathlib.Path(platformdirs.user_data_dir("determined"))


def init(
    *,
    distributed: DistributedContext | None = None,
    checkpoint_storage: str | dict[str, Any] | None = None,
    preempt_mode: PreemptMode = PreemptMode.WorkersAskChief,
    tensorboard_mode: TensorboardMode = TensorboardMode.AUTO,
) -> Context:
    """Create the Core API context for this process, on-cluster or off.

    Args:
        distributed: the DistributedContext to use; by default one is chosen for the environment
            (torchrun, DeepSpeed, Horovod, TF_CONFIG variables, else a single process).
        checkpoint_storage: a path, a storage URL or a ``checkpoint_storage`` dict, overriding the
            experiment's storage (on-cluster) or the default local directory (off-cluster).
        preempt_mode: which ranks watch for preemption (see PreemptMode).
        tensorboard_mode: AUTO uploads TensorBoard files for you; MANUAL leaves it to you.
    """
    preempt_mode = PreemptMode(preempt_mode)
    tensorboard_mode = TensorboardMode(tensorboard_mode)
    info = determined.get_cluster_info()
    owns_distributed = distributed is None
    dist = distributed if distributed is not None else _hooks.distributed_context(info)
    try:
        if info is None or info.task_type != "TRIAL":
            return _init_local(
                info, dist, checkpoint_storage, preempt_mode, tensorboard_mode, owns_distributed
            )
        return _init_trial(
            info, dist, checkpoint_storage, preempt_mode, tensorboard_mode, owns_distributed
        )
    except BaseException:
        if owns_distributed:
            dist.close()
        raise


def _dummy_init(
    *,
    distributed: DistributedContext | None = None,
    checkpoint_storage: str | dict[str, Any] | None = None,
    tensorboard_path: pathlib.Path | None = None,
    preempt_mode: PreemptMode = PreemptMode.WorkersAskChief,
) -> Context:
    """Upstream's off-cluster ``init`` (used by its Trainers): a local Context whatever the environment.

    Unlike :func:`init`, it ignores any ClusterInfo; ``tensorboard_path`` overrides the local default.
    """
    owns_distributed = distributed is None
    dist = distributed if distributed is not None else _hooks.distributed_context(None)
    context = _init_local(
        None,
        dist,
        checkpoint_storage,
        PreemptMode(preempt_mode),
        TensorboardMode.AUTO,
        owns_distributed,
    )
    if tensorboard_path is not None:
        context.train._tensorboard_path = pathlib.Path(tensorboard_path)
    return context


def _init_local(
    info: determined.ClusterInfo | None,
    dist: DistributedContext,
    checkpoint_storage: str | dict[str, Any] | None,
    preempt_mode: PreemptMode,
    tensorboard_mode: TensorboardMode,
    owns_distributed: bool,
) -> Context:
    if checkpoint_storage is None:
        checkpoint_storage = str(default_local_storage_path())
    storage_manager = _storage_from_argument(checkpoint_storage)
    backend = LocalBackend(storage_manager)
    tb_path = default_tensorboard_path(
        info.allocation_id if info else None, dist.rank, info.cluster_id if info else ""
    )
    train = TrainContext(
        backend,
        trial_id=0,
        run_id=0,
        exp_id=0,
        tensorboard_mode=tensorboard_mode,
        tensorboard_path=tb_path,
    )
    return Context(
        checkpoint=CheckpointContext(
            dist, storage_manager, backend, task_id=info.task_id if info else "local"
        ),
        distributed=dist,
        preempt=PreemptContext(dist, _hooks.preemption_sources(None), backend, None, preempt_mode),
        train=train,
        searcher=SearcherContext(backend, dist, 0, max_length=1),
        profiler=ProfilerContext(
            lambda group, metrics: train._shipper.report(group, metrics), "local", dist.local_rank
        ),
        experimental=ExperimentalCoreContext(backend, None),
        info=info,
        backend=backend,
        owns_distributed=owns_distributed,
    )


def _init_trial(
    info: determined.ClusterInfo,
    dist: DistributedContext,
    checkpoint_storage: str | dict[str, Any] | None,
    preempt_mode: PreemptMode,
    tensorboard_mode: TensorboardMode,
    owns_distributed: bool,
) -> Context:
    from determined.client import MasterClient, Session

    cert: str | bool | None = info.master_cert_file
    if cert == "noverify":
        cert = False
    client = MasterClient(
        Session(info.master_url, info.session_token, allocation_token=True, cert=cert)
    )
    trial = info.trial
    config = trial.config
    if checkpoint_storage is not None:
        storage_manager = _storage_from_argument(checkpoint_storage)
        storage_config: dict[str, Any] | None = (
            checkpoint_storage if isinstance(checkpoint_storage, dict) else None
        )
    else:
        storage_config = dict(config.get("checkpoint_storage") or {})
        if not storage_config:
            raise ValueError(
                "checkpoint_storage: the experiment config has none and init() got none"
            )
        storage_manager = _hooks.checkpoint_storage(storage_config)
    # Only the chief announces the run (upstream had every rank do it).
    storage_backend_id = dist.broadcast(
        client.start_run(trial.trial_id, storage_config) if dist.rank == 0 else None
    )
    tb_path = default_tensorboard_path(info.allocation_id, dist.rank, info.cluster_id)
    tb_sync = TensorboardSync(
        storage_manager,
        tb_path,
        trial_sync_path(trial.experiment_id, trial.trial_id, info.cluster_id),
        dist.rank,
    )
    train = TrainContext(
        client,
        trial_id=trial.trial_id,
        run_id=trial._trial_run_id,
        exp_id=trial.experiment_id,
        tensorboard_mode=tensorboard_mode,
        tensorboard_path=tb_path,
        tensorboard_sync=tb_sync,
    )
    max_length, units = parse_max_length(dict(config.get("searcher") or {}))
    sources = (
        _hooks.preemption_sources(info)
        if preempt_mode == PreemptMode.WorkersAskMaster or dist.rank == 0
        else []
    )
    return Context(
        checkpoint=CheckpointContext(
            dist,
            storage_manager,
            client,
            task_id=info.task_id,
            allocation_id=info.allocation_id,
            storage_backend_id=storage_backend_id,
            require_steps_completed=True,
            on_report=lambda: train._sync_tensorboard(),
        ),
        distributed=dist,
        preempt=PreemptContext(dist, sources, client, info.allocation_id, preempt_mode),
        train=train,
        searcher=SearcherContext(
            client, dist, trial.trial_id, max_length, units, operations=client
        ),
        profiler=ProfilerContext(
            lambda group, metrics: train._shipper.report(group, metrics),
            info.agent_id,
            dist.local_rank,
        ),
        experimental=ExperimentalCoreContext(client, trial.trial_id),
        info=info,
        backend=client,
        owns_distributed=owns_distributed,
    )


_sigusr1_installed = False


def _install_stack_dump_on_sigusr1() -> None:
    """``kill -USR1 <pid>`` prints every thread's stack to stderr (for hung trials)."""
    global _sigusr1_installed
    if _sigusr1_installed or threading.current_thread() is not threading.main_thread():
        return
    previous = signal.getsignal(signal.SIGUSR1)

    def dump(signum: int, frame: Any) -> None:
        for thread_id, stack in sys._current_frames().items():
            print(f"--- thread {thread_id} ---", file=sys.stderr)
            traceback.print_stack(stack, file=sys.stderr)
        if callable(previous):
            previous(signum, frame)

    signal.signal(signal.SIGUSR1, dump)
    _sigusr1_installed = True
