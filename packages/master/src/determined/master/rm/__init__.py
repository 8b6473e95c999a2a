"""Resource managers of det-master: where and when allocations run.

``resource_manager(config)`` answers the master config's ``resource_manager`` section through the
``det_resource_manager`` hook; the built-in answer is :class:`LocalResourceManager` (process groups
on this machine, scheduled by :class:`PriorityScheduler`). A new resource manager that schedules on
a thread of its own subclasses :class:`ThreadedResourceManager` (its docstring lists what to
implement) and passes ``determined.master.testing.rm_suite.ResourceManagerSuite``.
"""

from __future__ import annotations

import threading
from typing import Any, cast

from determined.master.rm._base import ResourceManager
from determined.master.rm._local import LocalResourceManager
from determined.master.rm._scheduler import DEFAULT_MAX_BYPASS, JobLimits, PriorityScheduler, Start
from determined.master.rm._slots import Gpu, discover_gpus
from determined.master.rm._threaded import ThreadedResourceManager
from determined.master.rm._types import (
    LOG_LEVELS,
    UNSET,
    AllocationRequest,
    Assignment,
    LaunchSpec,
    LogLine,
    ResourceManagerEvents,
    Unset,
    parse_log_line,
)

__all__ = [
    "DEFAULT_MAX_BYPASS",
    "LOG_LEVELS",
    "UNSET",
    "AllocationRequest",
    "Assignment",
    "Gpu",
    "JobLimits",
    "LaunchSpec",
    "LocalResourceManager",
    "LogLine",
    "PriorityScheduler",
    "ResourceManager",
    "ResourceManagerEvents",
    "Start",
    "ThreadedResourceManager",
    "Unset",
    "discover_gpus",
    "parse_log_line",
    "resource_manager",
]

_setup_lock = threading.Lock()


def _plugin_manager() -> Any:
    """det's plugin manager with the master's hook specs and the built-in local RM (idempotent).

    The master's plugin adds the hook specs as it registers (``det_add_hookspecs``); its entry point
    has registered it already unless autoload is off.
    """
    from determined.core import plugins
    from determined.master import _plugin as _master_plugin
    from determined.master.rm import _plugin
    from determined.master.rm.ray import _plugin as _ray_plugin
    from determined.master.rm.slurm import _plugin as _slurm_plugin

    with _setup_lock:
        plugins.register(_master_plugin, name="master")
        plugins.register(_plugin, name="determined.master.rm._plugin")
        plugins.register(_ray_plugin, name="determined.master.rm.ray._plugin")
        plugins.register(_slurm_plugin, name="determined.master.rm.slurm._plugin")
    return plugins.get_plugin_manager()


def resource_manager(config: dict[str, Any] | None = None) -> ResourceManager:
    """The resource manager for a master config's ``resource_manager`` section (not yet started).

    ValueError naming ``resource_manager.type`` when no installed plugin handles it.
    """
    config = dict(config or {})
    result = _plugin_manager().hook.det_resource_manager(config=config)
    if result is None:
        raise ValueError(
            f"resource_manager.type: no resource manager plugin handles {config.get('type')!r}"
        )
    return cast(ResourceManager, result)
