"""``determined.common.util``: the small helpers upstream's training code and scripts import from it.

Upstream's module held the CLI's and harness's odds and ends; what user code reaches for is kept
here with upstream's names: the legacy metric-group names (``_LEGACY_TRAINING``, ...), ``chunks``,
``sizeof_fmt``, ``debug_mode``, ``strtobool`` and the YAML wrappers (PyYAML's safe loader and dumper
here, ruamel's upstream).
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator, Sequence
from typing import IO, Any, TypeVar

import yaml

_LEGACY_TRAINING = "training"
_LEGACY_VALIDATION = "validation"
_INFERENCE = "inference"

T = TypeVar("T")


def chunks(lst: Sequence[T], chunk_size: int) -> Iterator[Sequence[T]]:
    """``lst`` in consecutive pieces of ``chunk_size`` (the last may be shorter)."""
    for i in range(0, len(lst), chunk_size):
        yield lst[i : i + chunk_size]


def sizeof_fmt(val: float) -> str:
    """A byte count as upstream's CLI prints it (``1.5KB``, ``3.0MB``)."""
    val = float(val)
    for unit in ("", "K", "M", "G", "T", "P", "E", "Z"):
        if abs(val) < 1024.0:
            return f"{val:3.1f}{unit}B"
        val /= 1024.0
    return f"{val:.1f}YB"


def debug_mode() -> bool:
    """Whether ``DET_DEBUG`` asks for debug output."""
    return os.getenv("DET_DEBUG", "").lower() in ("true", "1", "yes")


def strtobool(val: str) -> bool:
    """``y/yes/t/true/on/1`` → True, ``n/no/f/false/off/0`` → False (ValueError otherwise)."""
    lowered = val.lower()
    if lowered in ("y", "yes", "t", "true", "on", "1"):
        return True
    if lowered in ("n", "no", "f", "false", "off", "0"):
        return False
    raise ValueError(f"invalid truth value {val!r}")


def yaml_safe_load(f: IO[Any] | str) -> Any:
    """Parse YAML text or a stream with the safe loader."""
    return yaml.safe_load(f)


def yaml_safe_dump(
    data: Any, stream: IO[Any] | None = None, default_flow_style: bool | None = None
) -> Any:
    """Dump ``data`` as YAML into ``stream`` (None: return the text), keys in their order."""
    if stream is not None:
        yaml.safe_dump(data, stream, default_flow_style=default_flow_style, sort_keys=False)
        return None
    out = io.StringIO()
    yaml.safe_dump(data, out, default_flow_style=default_flow_style, sort_keys=False)
    return out.getvalue()
