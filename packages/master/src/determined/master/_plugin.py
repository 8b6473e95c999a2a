"""det-master's plugin for det's plugin manager: it adds the master's hook specifications.

det-core does not know the master. Like a pytest plugin that adds hooks, this plugin implements the
historic ``det_add_hookspecs`` hook, so the specs of :mod:`determined.master.hookspecs` arrive with
it: through det-master's entry point ``master`` (group ``determined``) when plugins autoload, and
through :func:`determined.master.rm.resource_manager`, which registers it, when they do not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from determined.core.plugins import hookimpl
from determined.master import hookspecs

if TYPE_CHECKING:
    import pluggy


@hookimpl
def det_add_hookspecs(plugin_manager: pluggy.PluginManager) -> None:
    """Add ``det_resource_manager`` and the master's other hook specs to det's plugin manager."""
    plugin_manager.add_hookspecs(hookspecs)
