"""``core_v2``: the Core API as module-level singletons, for runs the master did not start.

``core_v2.init(config=core_v2.Config(name=...))`` either joins the trial the master launched
(on-cluster, where ``config`` is ignored and this is ``det.core.init()``), or creates an unmanaged
experiment and trial on the master named by ``DET_MASTER`` (or ``client``) and reports to it from
wherever the script runs. ``core_v2.train``, ``.checkpoint``, ``.info``... are then set;
``core_v2.close()`` (also run at exit) flushes everything and reports the trial's final state.
"""

from __future__ import annotations

import atexit
import dataclasses
import sys
import uuid
import warnings
from typing import TYPE_CHECKING, Any, cast

import determined
from determined import core
from determined.core import _hooks
from determined.core._context import default_local_storage_path
from determined.experimental.core_v2 import _unmanaged
from determined.experimental.core_v2._context import make_unmanaged_context

if TYPE_CHECKING:
    from determined.experimental import Determined

_context: core.Context | None = None
_client: Determined | None = None
_atexit_registered = False


@dataclasses.dataclass
class Config:
    """What an unmanaged run tells the master about its experiment (ignored on-cluster, where the
    experiment config the master launched with rules).

    Attributes:
        name: the experiment's name (default ``unmanaged-<8 hex digits>``).
        hparams: this trial's hyperparameters (``core_v2.info.trial.hparams``).
        data: the config's free-form ``data`` section.
        description: the experiment's description.
        labels: the experiment's labels.
        workspace: the workspace of ``project`` (set both or neither; default ``Uncategorized``).
        project: the project the experiment goes to, by name (default ``Uncategorized``).
        checkpoint_storage: a path, a storage URL or a ``checkpoint_storage`` dict (default: a
            ``checkpoints`` directory under the user data dir).
        searcher: the experiment's ``searcher`` section; it only names the metric to rank trials by
            and tells a search (several trials) from a single run: the master runs no searcher for
            an unmanaged experiment.
        external_experiment_id: your id of the experiment: runs with the same one share it (several
            trials of a search, or one trial run again).
        external_trial_id: your id of the trial inside that experiment: a run with the same one
            continues the trial from its latest checkpoint. Needs ``external_experiment_id``.
    """

    name: str | None = None
    hparams: dict[str, Any] | None = None
    data: dict[str, Any] | None = None
    description: str | None = None
    labels: list[str] | None = None
    workspace: str | None = None
    project: str | None = None
    checkpoint_storage: str | dict[str, Any] | None = None
    searcher: dict[str, Any] | None = None
    external_experiment_id: str | None = None
    external_trial_id: str | None = None


@dataclasses.dataclass
class DefaultConfig(Config):
    """Deprecated name of :class:`Config` (warns when built)."""

    def __init__(self, **kwargs: Any) -> None:
        warnings.warn(
            "core_v2.DefaultConfig is deprecated: use core_v2.Config",
            FutureWarning,
            stacklevel=2,
        )
        super().__init__(**kwargs)


@dataclasses.dataclass
class UnmanagedConfig(Config):
    """Deprecated name of :class:`Config` (warns when built)."""

    def __init__(self, **kwargs: Any) -> None:
        warnings.warn(
            "core_v2.UnmanagedConfig is deprecated: use core_v2.Config",
            FutureWarning,
            stacklevel=2,
        )
        super().__init__(**kwargs)


def _package() -> Any:
    return sys.modules["determined.experimental.core_v2"]


def _set_singletons(context: core.Context | None) -> None:
    package = _package()
    package.train = context.train if context is not None else None
    package.checkpoint = context.checkpoint if context is not None else None
    package.distributed = context.distributed if context is not None else None
    package.preempt = context.preempt if context is not None else None
    package.searcher = context.searcher if context is not None else None
    package.info = context.info if context is not None else None


def _merge_config(
    config: Config | None, defaults: DefaultConfig | None, unmanaged: UnmanagedConfig | None
) -> Config:
    """The one Config of the deprecated ``defaults``/``unmanaged`` pair or ``config``."""
    info = determined.get_cluster_info()
    if defaults is not None or unmanaged is not None:
        warnings.warn(
            "core_v2.init(defaults=..., unmanaged=...) is deprecated: pass config=core_v2.Config()",
            FutureWarning,
            stacklevel=3,
        )
        if info is not None:
            warnings.warn(
                "this process runs in a trial the master launched: its experiment config rules "
                "and core_v2's config is ignored",
                FutureWarning,
                stacklevel=3,
            )
    if config is not None:
        return config
    if defaults is None and unmanaged is None and info is None:
        raise ValueError(
            "core_v2.init(): pass config=core_v2.Config(name=...) or run in a trial the master "
            "launched"
        )
    merged = cast(Config, defaults) if defaults is not None else Config()
    if unmanaged is not None:
        merged.workspace = merged.workspace or unmanaged.workspace
        merged.project = merged.project or unmanaged.project
        merged.external_experiment_id = (
            merged.external_experiment_id or unmanaged.external_experiment_id
        )
        merged.external_trial_id = merged.external_trial_id or unmanaged.external_trial_id
    return merged


def _storage_config(checkpoint_storage: str | dict[str, Any] | None) -> dict[str, Any]:
    from determined import storage

    if checkpoint_storage is None:
        checkpoint_storage = str(default_local_storage_path() / "checkpoints")
    if isinstance(checkpoint_storage, str):
        return storage.to_config(checkpoint_storage)
    if isinstance(checkpoint_storage, dict):
        return dict(checkpoint_storage)
    raise TypeError(
        "checkpoint_storage: must be a path, a storage URL (s3://bucket/prefix, ...) or a dict, "
        f"not {type(checkpoint_storage).__name__}"
    )


def _experiment_config(config: Config, storage_config: dict[str, Any]) -> dict[str, Any]:
    """The experiment config an unmanaged run sends (unset fields left out)."""
    fields: dict[str, Any] = {
        "name": config.name or f"unmanaged-{uuid.uuid4().hex[:8]}",
        "data": config.data,
        "description": config.description,
        "labels": config.labels,
        "searcher": config.searcher or {"name": "single", "metric": "unmanaged"},
        "workspace": config.workspace,
        "project": config.project,
        "checkpoint_storage": storage_config,
    }
    return {key: value for key, value in fields.items() if value is not None}


def _build_context(
    client: Determined | None,
    config: Config,
    distributed: core.DistributedContext | None,
    checkpoint_storage: str | dict[str, Any] | None,
    preempt_mode: core.PreemptMode,
    tensorboard_mode: core.TensorboardMode,
) -> tuple[core.Context, Determined | None]:
    info = determined.get_cluster_info()
    if info is not None and info.task_type == "TRIAL":
        context = core.init(
            distributed=distributed,
            checkpoint_storage=checkpoint_storage,
            preempt_mode=preempt_mode,
            tensorboard_mode=tensorboard_mode,
        )
        return context, client
    if client is None:
        from determined.experimental import Determined

        client = Determined()
    from determined.client import MasterClient

    storage_config = _storage_config(checkpoint_storage or config.checkpoint_storage)
    owns_distributed = distributed is None
    dist = distributed if distributed is not None else _hooks.distributed_context(None)
    try:
        unmanaged_info = _unmanaged.get_or_create_experiment_and_trial(
            client,
            _experiment_config(config, storage_config),
            config.external_experiment_id,
            config.external_trial_id,
            config.hparams,
            dist,
        )
        context = make_unmanaged_context(
            unmanaged_info,
            MasterClient(client._session),
            client._api.trials,
            dist,
            owns_distributed,
            storage_config,
            core.PreemptMode(preempt_mode),
            core.TensorboardMode(tensorboard_mode),
        )
    except BaseException:
        if owns_distributed:
            dist.close()
        raise
    return context, client


def init_context(
    *,
    config: Config | None = None,
    defaults: DefaultConfig | None = None,
    unmanaged: UnmanagedConfig | None = None,
    client: Determined | None = None,
    distributed: core.DistributedContext | None = None,
    checkpoint_storage: str | dict[str, Any] | None = None,
    preempt_mode: core.PreemptMode = core.PreemptMode.WorkersAskChief,
    tensorboard_mode: core.TensorboardMode = core.TensorboardMode.AUTO,
) -> core.Context:
    """A Core API context for this run, to use as a context manager (``with ... as core_context``).

    Off-cluster it creates (or, by external ids, finds) an unmanaged experiment and trial on the
    master of ``client`` (default: ``Determined()``, i.e. ``$DET_MASTER``); on-cluster it is
    ``det.core.init()``. The arguments after ``client`` are :func:`determined.core.init`'s.

    Raises:
        ValueError: no ``config`` off-cluster, or an invalid combination of external ids.
        MasterNotFoundError: no master answers (``DET_MASTER`` unset and none on localhost:8080).
    """
    context, _ = _build_context(
        client,
        _merge_config(config, defaults, unmanaged),
        distributed,
        checkpoint_storage,
        preempt_mode,
        tensorboard_mode,
    )
    return context


def init(
    *,
    config: Config | None = None,
    defaults: DefaultConfig | None = None,
    unmanaged: UnmanagedConfig | None = None,
    client: Determined | None = None,
    distributed: core.DistributedContext | None = None,
    checkpoint_storage: str | dict[str, Any] | None = None,
    preempt_mode: core.PreemptMode = core.PreemptMode.WorkersAskChief,
    tensorboard_mode: core.TensorboardMode = core.TensorboardMode.AUTO,
) -> None:
    """Start the run and set ``core_v2.train``, ``.checkpoint``, ``.distributed``, ``.preempt``,
    ``.searcher`` and ``.info`` (see :func:`init_context` for the arguments).

    A second ``init()`` closes the first run. ``close()`` runs at interpreter exit if you do not
    call it; an uncaught exception or a non-zero ``sys.exit`` marks the trial ERROR.
    """
    global _context, _client, _atexit_registered
    if _context is not None:
        close()
    merged = _merge_config(config, defaults, unmanaged)
    context, _client = _build_context(
        client, merged, distributed, checkpoint_storage, preempt_mode, tensorboard_mode
    )
    try:
        context.start()
    except BaseException:
        context.close()
        raise
    _context = context
    _set_singletons(context)
    if not _atexit_registered:
        atexit.register(close)
        _atexit_registered = True


def close() -> None:
    """Finish the run started by :func:`init`: flush metrics, report the trial's final state.

    ``core_v2.train`` is ``None`` afterwards (``info`` and the other singletons stay readable, as
    upstream's).
    """
    global _context
    context, _context = _context, None
    _package().train = None
    if context is not None:
        context.close()


def url_reverse_webui_exp_view() -> str:
    """The web UI's page of this run's experiment (after :func:`init`)."""
    info = _package().info
    if info is None:
        raise RuntimeError("core_v2.url_reverse_webui_exp_view(): call core_v2.init() first")
    master = _client._master if _client is not None else info.master_url
    return _unmanaged.url_reverse_webui_exp_view(master, info.trial.experiment_id)
