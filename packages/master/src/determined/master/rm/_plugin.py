"""The built-in ``det_resource_manager`` implementation: ``type: local``."""

from __future__ import annotations

from typing import Any

from determined.core.plugins import hookimpl
from determined.master.rm._base import ResourceManager
from determined.master.rm._local import LocalResourceManager

LOCAL_KEYS = {"type", "slots", "slot_type", "max_bypass", "scheduler", "cluster_name"}
"""Keys of a ``resource_manager`` section the local resource manager understands."""


@hookimpl(trylast=True)
def det_resource_manager(config: dict[str, Any]) -> ResourceManager | None:
    """A LocalResourceManager for ``{"type": "local", "slots": N, "slot_type": "auto"}``."""
    if config.get("type", "local") != "local":
        return None
    unknown = sorted(set(config) - LOCAL_KEYS)
    if unknown:
        raise ValueError(
            f"resource_manager.{unknown[0]}: not a setting of the local resource manager"
            f" (known: {', '.join(sorted(LOCAL_KEYS))})"
        )
    slots = config.get("slots")
    if slots is not None and (not isinstance(slots, int) or isinstance(slots, bool) or slots < 0):
        raise ValueError(f"resource_manager.slots: must be an integer >= 0, got {slots!r}")
    slot_type = config.get("slot_type", "auto")
    if slot_type not in ("auto", "cpu", "cuda"):
        raise ValueError(
            f"resource_manager.slot_type: must be 'auto', 'cpu' or 'cuda', got {slot_type!r}"
        )
    scheduler = config.get("scheduler") or {}
    if not isinstance(scheduler, dict):
        raise ValueError(f"resource_manager.scheduler: must be a mapping, got {scheduler!r}")
    scheduler_type = scheduler.get("type", "priority")
    if scheduler_type != "priority":
        raise ValueError(
            f"resource_manager.scheduler.type: the local resource manager schedules by"
            f" 'priority' only, got {scheduler_type!r}"
        )
    max_bypass = config.get("max_bypass", 4)
    if not isinstance(max_bypass, int) or isinstance(max_bypass, bool) or max_bypass < 0:
        raise ValueError(
            f"resource_manager.max_bypass: must be an integer >= 0, got {max_bypass!r}"
        )
    return LocalResourceManager(slots=slots, slot_type=slot_type, max_bypass=max_bypass)
