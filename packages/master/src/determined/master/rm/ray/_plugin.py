"""The ``det_resource_manager`` implementation for ``type: ray`` (imports no Ray until started)."""

from __future__ import annotations

from typing import Any

from determined.core.plugins import hookimpl
from determined.master.rm._base import ResourceManager


@hookimpl
def det_resource_manager(config: dict[str, Any]) -> ResourceManager | None:
    """A RayResourceManager for ``{"type": "ray", "address": "auto", ...}``; None for other types."""
    if config.get("type") != "ray":
        return None
    from determined.master.rm.ray._config import parse_config
    from determined.master.rm.ray._rm import RayResourceManager

    return RayResourceManager(parse_config(config))
