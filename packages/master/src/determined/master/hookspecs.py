"""The hook specifications det-master adds to det's plugin manager.

det-core's specs live in ``determined.core.hookspecs``; these are the master's own. det-core does
not name them: det-master's plugin (``determined.master._plugin``, registered by the entry point
``master`` and by ``determined.master.rm.resource_manager``) adds them through the historic
``det_add_hookspecs`` hook, as a pytest plugin adds its hooks. A third-party resource manager is a
module with a function named like the spec, decorated with ``determined.core.plugins.hookimpl``,
published under the entry-point group ``determined``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from determined.core.plugins import hookspec

if TYPE_CHECKING:
    from determined.master.rm import ResourceManager


@hookspec(firstresult=True)
def det_resource_manager(config: dict[str, Any]) -> ResourceManager | None:
    """Return the resource manager for the master config's ``resource_manager`` section.

    Stops at first non-None result. The built-in ``local`` manager (processes on this machine) is
    registered ``trylast``, so a plugin that recognises its own ``type`` (``ray``, ...) wins.

    Args:
        config: the ``resource_manager`` section, e.g. ``{"type": "local", "slots": 8}``;
            ``type`` defaults to ``"local"``.

    Returns:
        A ResourceManager not yet started, or ``None`` when this plugin does not handle
        ``config["type"]``. Raise ValueError naming the field for a bad value of a type it handles.
    """
