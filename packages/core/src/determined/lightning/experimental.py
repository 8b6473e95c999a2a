"""``determined.lightning.experimental.DetLogger``: upstream's Lightning logger for ``core_v2`` runs.

The class is det-plugin-pytorch's :class:`determined.pytorch.lightning.CoreV2DetLogger`, loaded on
first use, so importing this module needs neither torch nor Lightning.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from determined.pytorch.lightning import CoreV2DetLogger as DetLogger

_MISSING = (
    "determined.lightning.experimental.DetLogger needs the 'det-plugin-pytorch' distribution "
    "with Lightning: pip install 'det-plugin-pytorch[lightning]'"
)
_PROVIDERS = ("determined.pytorch", "determined.pytorch.lightning", "torch", "pytorch_lightning")


def __getattr__(name: str) -> Any:
    if name != "DetLogger":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        from determined.pytorch.lightning import CoreV2DetLogger
    except ModuleNotFoundError as exc:
        if exc.name not in _PROVIDERS:
            raise  # the plugin is there but one of its own imports is missing
        raise ImportError(_MISSING) from None
    globals()["DetLogger"] = CoreV2DetLogger
    return CoreV2DetLogger


def __dir__() -> list[str]:
    return ["DetLogger"]


__all__ = ["DetLogger"]
