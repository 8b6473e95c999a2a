"""The hook specifications of det: everything a plugin can provide.

Callers: det-core (``core.init()``, the launchers), det-master (searchers, trial runners) and the
plugins themselves, always through the typed facade of :mod:`determined.core.plugins`.

A plugin is a module with functions named like these specs and decorated with
``determined.core.plugins.hookimpl``. Publish it under the entry-point group ``determined``::

    [project.entry-points.determined]
    my_storage = "my_package.det_plugin"

"Provide X" hooks are ``firstresult``: plugins are asked newest-registered first and the first non-None
answer wins. det's own behaviour is registered the same way, as ``trylast`` built-in plugins, so a third
party can take over any of them without changing det.

A distribution that defines hooks of its own (det-master's ``det_resource_manager``) adds their specs
through :func:`det_add_hookspecs`, so det-core never names it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from determined.core._markers import hookspec

if TYPE_CHECKING:
    import pluggy

    from determined import ClusterInfo
    from determined.core._distributed import DistributedContext
    from determined.core._preempt_sources import PreemptionSource
    from determined.core._trial_runner import TrialRunner
    from determined.searcher import SearchMethod
    from determined.storage import StorageManager


# ---------------------------------------------------------------------------------------------------
# more hook specifications


@hookspec(historic=True)
def det_add_hookspecs(plugin_manager: pluggy.PluginManager) -> None:
    """Add the hook specifications a plugin's distribution defines, as pytest's ``pytest_addhooks``.

    Historic: called once for every plugin registered now or later, so specs arrive whenever the
    plugin does (by entry point, or registered by hand with autoload off). det-master implements it
    with ``plugin_manager.add_hookspecs(determined.master.hookspecs)``.

    Args:
        plugin_manager: det's plugin manager; call its ``add_hookspecs(module)``.
    """


# ---------------------------------------------------------------------------------------------------
# distributed training


@hookspec(firstresult=True)
def det_distributed_context(cluster_info: ClusterInfo | None) -> DistributedContext | None:
    """Return the DistributedContext for the environment this process runs in.

    Stops at first non-None result. Called by ``core.init()`` when the caller passed no ``distributed``.
    Built-ins recognise torch.distributed (``RANK``/``WORLD_SIZE``...), DeepSpeed, Horovod and
    ``TF_CONFIG`` variables; the last resort is a single-process context.

    Args:
        cluster_info: this process's ClusterInfo, or ``None`` off-cluster.

    Returns:
        A DistributedContext, or ``None`` when this plugin does not recognise the environment.
    """


# ---------------------------------------------------------------------------------------------------
# checkpoint storage


@hookspec(firstresult=True)
def det_checkpoint_storage(config: dict[str, Any]) -> StorageManager | None:
    """Return a storage manager for a ``checkpoint_storage`` config.

    Stops at first non-None result. Built-ins handle ``shared_fs``, ``directory``, ``s3``, ``gcs``,
    ``azure`` and ``{"type": "fsspec", "url": ...}`` on top of fsspec.

    Args:
        config: the experiment config's ``checkpoint_storage`` section, e.g. ``{"type": "s3", "bucket": ...}``.

    Returns:
        A StorageManager, or ``None`` when this plugin does not handle ``config["type"]``.
    """


# ---------------------------------------------------------------------------------------------------
# hyperparameter search


@hookspec(firstresult=True)
def det_search_method(config: dict[str, Any]) -> SearchMethod | None:
    """Return a search method (a pure state machine) for an experiment's ``searcher`` config.

    Stops at first non-None result. det-master ships ``single``, ``random``, ``grid``,
    ``async_halving``, ``adaptive_asha`` and ``pbt``.

    Args:
        config: the whole, validated experiment config (``config["searcher"]["name"]`` picks the method;
            ``hyperparameters`` and ``reproducibility`` are there too).

    Returns:
        A SearchMethod, or ``None`` when this plugin does not implement ``config["searcher"]["name"]``.
    """


# ---------------------------------------------------------------------------------------------------
# preemption


@hookspec
def det_preemption_sources(cluster_info: ClusterInfo | None) -> list[PreemptionSource] | None:
    """Return sources of preemption signals for this process.

    Not firstresult: every plugin's sources are combined, and the trial should stop when any source
    fires. Built-ins: SIGTERM (always), and the master's long-poll on-cluster (which carries pause,
    kill-gracefully and searcher-stop decisions).

    Args:
        cluster_info: this process's ClusterInfo, or ``None`` off-cluster.

    Returns:
        A list of sources (possibly empty), or ``None``.
    """


# ---------------------------------------------------------------------------------------------------
# trial runners


@hookspec(firstresult=True)
def det_trial_runner(trial_class: type) -> TrialRunner | None:
    """Return a runner able to train instances of ``trial_class`` (a legacy Trial API class).

    Stops at first non-None result. Used for entrypoints of the form ``model_def:MyTrial``:
    det-plugin-pytorch answers for ``PyTorchTrial`` subclasses, det-plugin-keras for ``TFKerasTrial``, ...

    Args:
        trial_class: the class named by the entrypoint.

    Returns:
        A TrialRunner, or ``None`` when this plugin does not know the class.
    """
