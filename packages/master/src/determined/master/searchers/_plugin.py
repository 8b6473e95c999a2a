"""det-master's built-in search methods, offered through the ``det_search_method`` hook.

Registered ``trylast`` like any other plugin, so a third-party plugin may answer for the same names.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from determined.core.plugins import hookimpl
from determined.master.searchers._adaptive_asha import AdaptiveASHASearch, make_brackets
from determined.master.searchers._asha import AsyncHalvingSearch
from determined.master.searchers._config import (
    DEFAULT_MAX_CONCURRENT_TRIALS,
    DEFAULT_MAX_RUNGS,
    get_divisor,
    get_int,
    get_length,
    searcher_section,
)
from determined.master.searchers._grid import GridSearch
from determined.master.searchers._pbt import PBTConfig, PBTSearch
from determined.master.searchers._random import RandomSearch
from determined.searcher import SearchMethod

BUILTIN_SEARCHERS = ("single", "random", "grid", "async_halving", "adaptive_asha", "pbt")


def _metric(section: Mapping[str, Any]) -> tuple[str, bool]:
    metric = section.get("metric")
    if not isinstance(metric, str) or not metric:
        raise ValueError(f"searcher.metric: expected a validation metric name, got {metric!r}")
    smaller_is_better = section.get("smaller_is_better", True)
    if not isinstance(smaller_is_better, bool):
        raise ValueError(f"searcher.smaller_is_better: expected a bool, got {smaller_is_better!r}")
    return metric, smaller_is_better


def _bracket_rungs(section: Mapping[str, Any]) -> list[int]:
    value = section.get("bracket_rungs") or []
    if not isinstance(value, list) or not all(
        isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in value
    ):
        raise ValueError(f"searcher.bracket_rungs: expected a list of positive ints, got {value!r}")
    return list(value)


def build_search_method(config: Mapping[str, Any]) -> SearchMethod | None:
    """The built-in method for ``config["searcher"]["name"]``, or ``None`` for other names."""
    section = searcher_section(config)
    name = section.get("name")
    mct = DEFAULT_MAX_CONCURRENT_TRIALS
    if name == "single":
        return RandomSearch(max_trials=1, max_concurrent_trials=1, search_method_type="single")
    if name == "random":
        return RandomSearch(
            max_trials=get_int(section, "max_trials", None, 1),
            max_concurrent_trials=get_int(section, "max_concurrent_trials", mct, 0),
        )
    if name == "grid":
        return GridSearch(max_concurrent_trials=get_int(section, "max_concurrent_trials", mct, 0))
    if name == "async_halving":
        metric, smaller_is_better = _metric(section)
        time_metric, max_time = get_length(section)
        return AsyncHalvingSearch(
            metric=metric,
            smaller_is_better=smaller_is_better,
            time_metric=time_metric,
            max_time=max_time,
            num_rungs=get_int(section, "num_rungs", None, 1),
            max_trials=get_int(section, "max_trials", None, 1),
            divisor=get_divisor(section),
            max_concurrent_trials=get_int(section, "max_concurrent_trials", mct, 0),
        )
    if name == "adaptive_asha":
        metric, smaller_is_better = _metric(section)
        time_metric, max_time = get_length(section)
        divisor = get_divisor(section)
        brackets = make_brackets(
            max_trials=get_int(section, "max_trials", None, 1),
            max_time=max_time,
            divisor=divisor,
            mode=str(section.get("mode") or "standard"),
            max_rungs=get_int(section, "max_rungs", DEFAULT_MAX_RUNGS, 1),
            bracket_rungs=_bracket_rungs(section),
            max_concurrent_trials=get_int(section, "max_concurrent_trials", mct, 0),
        )
        return AdaptiveASHASearch(
            brackets,
            metric=metric,
            smaller_is_better=smaller_is_better,
            time_metric=time_metric,
            max_time=max_time,
            divisor=divisor,
        )
    if name == "pbt":
        return PBTSearch(PBTConfig.from_section(section))
    return None


@hookimpl(trylast=True)
def det_search_method(config: dict[str, Any]) -> SearchMethod | None:
    """Provide ``single``, ``random``, ``grid``, ``async_halving``, ``adaptive_asha`` and ``pbt``."""
    return build_search_method(config)
