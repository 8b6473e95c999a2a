"""The ``det_resource_manager`` implementation for ``type: slurm``."""

from __future__ import annotations

from typing import Any

from determined.core.plugins import hookimpl
from determined.master.rm._base import ResourceManager


@hookimpl
def det_resource_manager(config: dict[str, Any]) -> ResourceManager | None:
    """A SlurmResourceManager for ``{"type": "slurm", ...}``; None for other types."""
    if config.get("type") != "slurm":
        return None
    from determined.master.rm.slurm._config import parse_config
    from determined.master.rm.slurm._rm import SlurmResourceManager

    return SlurmResourceManager(parse_config(config))
