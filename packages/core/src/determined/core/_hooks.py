"""The typed facade over det's plugin manager: the only module that calls ``pm.hook.*``.

The plugin manager is built lazily on first use: det's built-in plugins first (registered like any
third-party plugin, marked ``trylast``), then every entry point of the group ``determined``. Other
distributions add their own hook specs through the historic ``det_add_hookspecs`` hook, which runs
for each plugin as it registers. Plugins and other distributions use this facade through
:mod:`determined.core.plugins`.
``DET_DISABLE_PLUGIN_AUTOLOAD=1`` skips the entry points (tests use it for isolation);
``DET_TRACE_PLUGINS=1`` logs every hook call.
"""

from __future__ import annotations

import importlib
import logging
import os
import threading
import types
from typing import TYPE_CHECKING, Any, cast

import pluggy

from determined.core import hookspecs
from determined.core._markers import PROJECT_NAME

if TYPE_CHECKING:
    from determined import ClusterInfo
    from determined.core._distributed import DistributedContext
    from determined.core._preempt_sources import PreemptionSource
    from determined.core._trial_runner import TrialRunner
    from determined.searcher import SearchMethod
    from determined.storage import StorageManager

logger = logging.getLogger("determined.core")

BUILTIN_PLUGINS = (
    "determined.core._distributed_plugin",
    "determined.core._preempt_sources",
    "determined.storage._plugin",
)
"""Modules of det-core's own default behaviour, registered before any entry point."""

_lock = threading.Lock()
_plugin_manager: pluggy.PluginManager | None = None


def _build() -> pluggy.PluginManager:
    pm = pluggy.PluginManager(PROJECT_NAME)
    pm.add_hookspecs(hookspecs)
    pm.hook.det_add_hookspecs.call_historic(kwargs={"plugin_manager": pm})
    for name in BUILTIN_PLUGINS:
        pm.register(importlib.import_module(name), name=name)
    if os.environ.get("DET_DISABLE_PLUGIN_AUTOLOAD", "") in ("", "0"):
        pm.load_setuptools_entrypoints(PROJECT_NAME)
    pm.check_pending()
    if os.environ.get("DET_TRACE_PLUGINS", "") not in ("", "0"):
        pm.trace.root.setwriter(logger.info)
        pm.enable_tracing()
    return pm


def get_plugin_manager() -> pluggy.PluginManager:
    """Return the process-wide plugin manager, building it on first use."""
    global _plugin_manager
    with _lock:
        if _plugin_manager is None:
            _plugin_manager = _build()
        return _plugin_manager


def register(plugin: types.ModuleType | object, name: str | None = None) -> None:
    """Register ``plugin`` unless a plugin of that name is registered already (idempotent)."""
    pm = get_plugin_manager()
    plugin_name = name or getattr(plugin, "__name__", None) or repr(plugin)
    if pm.get_plugin(plugin_name) is None and not pm.is_registered(plugin):
        pm.register(plugin, name=plugin_name)


def distributed_context(cluster_info: ClusterInfo | None) -> DistributedContext:
    """The DistributedContext for this process (a single-process one when nothing else matches)."""
    result = get_plugin_manager().hook.det_distributed_context(cluster_info=cluster_info)
    return cast("DistributedContext", result)


def checkpoint_storage(config: dict[str, Any]) -> StorageManager:
    """A storage manager for ``config``; a clear ValueError when no plugin handles its ``type``."""
    result = get_plugin_manager().hook.det_checkpoint_storage(config=config)
    if result is None:
        raise ValueError(
            f"checkpoint_storage.type: no storage plugin handles {config.get('type')!r}"
        )
    return cast("StorageManager", result)


def search_method(config: dict[str, Any]) -> SearchMethod:
    """The search method for an experiment config; ValueError naming ``searcher.name`` otherwise."""
    result = get_plugin_manager().hook.det_search_method(config=config)
    if result is None:
        name = (config.get("searcher") or {}).get("name")
        from determined.config._searcher import PLUGIN_SEARCHERS, plugin_missing

        if name in PLUGIN_SEARCHERS:
            raise ValueError(
                f"searcher.name: no searcher plugin implements {name!r}; {plugin_missing(name)}"
            )
        raise ValueError(f"searcher.name: no searcher plugin implements {name!r}")
    return cast("SearchMethod", result)


def preemption_sources(cluster_info: ClusterInfo | None) -> list[PreemptionSource]:
    """Every plugin's preemption sources, combined."""
    answers = get_plugin_manager().hook.det_preemption_sources(cluster_info=cluster_info)
    return [source for answer in answers if answer for source in answer]


def trial_runner(trial_class: type) -> TrialRunner:
    """The runner for a legacy Trial class; ValueError when no installed plugin knows it."""
    result = get_plugin_manager().hook.det_trial_runner(trial_class=trial_class)
    if result is None:
        raise ValueError(
            f"entrypoint: no installed plugin can run {trial_class.__module__}.{trial_class.__qualname__}"
            " (PyTorchTrial needs det-plugin-pytorch, TFKerasTrial det-plugin-keras, ...)"
        )
    return cast("TrialRunner", result)
