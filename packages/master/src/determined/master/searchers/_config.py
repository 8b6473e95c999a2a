"""Reading the ``searcher`` section: defaults, the training length and metric checks."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

DEFAULT_MAX_CONCURRENT_TRIALS = 16
DEFAULT_DIVISOR = 4.0
DEFAULT_MAX_RUNGS = 5


def searcher_section(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """The ``searcher`` section of an experiment config; ValueError when it is missing."""
    section = config.get("searcher")
    if not isinstance(section, Mapping):
        raise ValueError("searcher: the experiment config has no searcher section")
    return section


def get_int(section: Mapping[str, Any], key: str, default: int | None, minimum: int) -> int:
    """``section[key]`` as an int ``>= minimum`` (``default`` when absent or null)."""
    value = section.get(key)
    if value is None:
        if default is None:
            raise ValueError(f"searcher.{key}: required for searcher {section.get('name')!r}")
        return default
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"searcher.{key}: expected an integer >= {minimum}, got {value!r}")
    return value


def get_divisor(section: Mapping[str, Any]) -> float:
    """``searcher.divisor`` as a float > 1 (default 4)."""
    value = section.get("divisor")
    if value is None:
        return DEFAULT_DIVISOR
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 1:
        raise ValueError(f"searcher.divisor: expected a number > 1, got {value!r}")
    return float(value)


def get_length(section: Mapping[str, Any]) -> tuple[str, int]:
    """The full training length as ``(time_metric, max_time)``.

    ``time_metric`` + ``max_time`` win when both are set; otherwise the legacy ``max_length``
    (``{"batches": N}``, or a bare int counted in ``time_metric`` or batches) is used.
    """
    time_metric = section.get("time_metric")
    max_time = section.get("max_time")
    if time_metric is not None and max_time is not None:
        return str(time_metric), _positive_length("max_time", max_time)
    legacy = section.get("max_length")
    if isinstance(legacy, Mapping):
        if len(legacy) != 1:
            raise ValueError(
                f"searcher.max_length: expected one unit like {{'batches': 100}}, got {legacy!r}"
            )
        ((unit, units),) = legacy.items()
        return str(unit), _positive_length("max_length", units)
    if legacy is not None:
        return str(time_metric or "batches"), _positive_length("max_length", legacy)
    raise ValueError(
        f"searcher.max_time: searcher {section.get('name')!r} needs time_metric and max_time"
    )


def _positive_length(key: str, value: Any) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"searcher.{key}: expected a positive integer, got {value!r}")
    return value


def read_number(metrics: Mapping[str, Any], name: str, role: str) -> float:
    """``metrics[name]`` as a float; ValueError naming the metric when missing or not a number."""
    if name not in metrics:
        raise ValueError(
            f"validation metrics: the searcher {role} {name!r} is missing from the reported "
            f"metrics (got {sorted(metrics)})"
        )
    value = metrics[name]
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise ValueError(
            f"validation metrics: the searcher {role} {name!r} must be a number, got {value!r}"
        )
    return float(value)
