"""Everything a det plugin, or another det distribution, takes from det-core: one public module.

A plugin (a storage backend, a search method, a framework's trial runner, a resource manager) and
det's own distributions (det-master, det-plugin-pytorch, det-plugin-keras, ...) import from here,
never from ``determined.core._*``. The private modules stay the implementation; this module names
what is stable.

Hook markers:

- :data:`hookspec` marks a hook specification (see :mod:`determined.core.hookspecs` for det-core's);
  a distribution that defines hooks of its own decorates them with it.
- :data:`hookimpl` marks a plugin's implementation of a hook, e.g. ``@hookimpl(trylast=True)``.
- :data:`PROJECT_NAME` is the pluggy project name, and the entry-point group plugins are published
  under (``"determined"``).

The plugin manager (built lazily on first use, then shared by the whole process):

- :func:`get_plugin_manager` returns it, for what the typed calls below do not cover: calling a
  distribution's own hooks (``get_plugin_manager().hook.det_resource_manager(config=...)``).
- :func:`register` registers a plugin module or object once (idempotent). Distributions register
  their built-in plugins with it so that they work with entry-point autoload off
  (``DET_DISABLE_PLUGIN_AUTOLOAD=1``).
- :func:`checkpoint_storage`, :func:`distributed_context`, :func:`preemption_sources`,
  :func:`search_method` and :func:`trial_runner` call det-core's hooks and return typed answers,
  raising a ValueError that names the config field when no plugin answers.

A distribution adds its own hook specs the way a pytest plugin adds hooks: its plugin implements the
historic ``det_add_hookspecs`` hook::

    from determined.core import plugins
    from my_distribution import hookspecs

    @plugins.hookimpl
    def det_add_hookspecs(plugin_manager):
        plugin_manager.add_hookspecs(hookspecs)

Helpers plugins share with det-core:

- :func:`lazy_exports` gives a package ``__init__`` a PEP 562 ``__getattr__``/``__dir__`` pair, so
  importing the package (which plugin discovery does) loads no framework.
- :func:`free_ports` finds free TCP ports, e.g. for a launcher's rendezvous.
- :func:`hold_rendezvous_ports` holds a multi-node job's rendezvous ports on its chief's node
  (a :class:`PortHold`: the variables naming them, released when the job ends), for a resource
  manager that starts each node's share itself.
- :func:`parse_max_length` reads a ``searcher`` config's training length (``max_length``, or
  ``max_time`` with ``time_metric``) as ``(length, unit)``.
"""

from __future__ import annotations

from determined._lazy import lazy_exports
from determined.core._hooks import (
    checkpoint_storage,
    distributed_context,
    get_plugin_manager,
    preemption_sources,
    register,
    search_method,
    trial_runner,
)
from determined.core._markers import PROJECT_NAME, hookimpl, hookspec
from determined.core._searcher import parse_max_length
from determined.launch._util import PortHold, free_ports, hold_rendezvous_ports

__all__ = [
    "PROJECT_NAME",
    "PortHold",
    "checkpoint_storage",
    "distributed_context",
    "free_ports",
    "get_plugin_manager",
    "hold_rendezvous_ports",
    "hookimpl",
    "hookspec",
    "lazy_exports",
    "parse_max_length",
    "preemption_sources",
    "register",
    "search_method",
    "trial_runner",
]
