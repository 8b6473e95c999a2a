"""``preview(config)``: the plan of a search, as ``POST /api/v1/preview-hp-search`` answers it."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from determined.master.searchers._adaptive_asha import Bracket
from determined.master.searchers._asha import rung_units
from determined.master.searchers._config import get_divisor, get_int, get_length, searcher_section
from determined.master.searchers._plugin import _bracket_rungs
from determined.searcher import grid_size


def _full_length(count: int) -> dict[str, Any]:
    return {"count": count, "unit": {"maxLength": True}}


def _plan_brackets(
    brackets: list[tuple[int, int]], divisor: float, time_metric: str, max_time: int
) -> list[dict[str, Any]]:
    """How many trials stop at each rung length, assuming each rung keeps ``floor(n/divisor)``."""
    stopped_at: dict[int, int] = {}
    for num_rungs, max_trials in brackets:
        remaining = max_trials
        units = rung_units(num_rungs, divisor, max_time)
        for index, length in enumerate(units):
            go_on = max(int(float(remaining) / divisor), 1)
            stopped = remaining if index == len(units) - 1 else remaining - go_on
            stopped_at[length] = stopped_at.get(length, 0) + stopped
            remaining = go_on
    return [
        {"count": count, "unit": {"name": time_metric, "value": length, "maxLength": False}}
        for length, count in sorted(stopped_at.items())
    ]


def _up_to(count: int, time_metric: str, length: int) -> dict[str, Any]:
    """``count`` trials that each train at most ``length`` (the search decides how far)."""
    return {
        "count": count,
        "unit": {"name": time_metric, "value": length, "maxLength": False, "upTo": True},
    }


def _plan_pbt(section: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The population, then each round's copies, with the most each can train: which members
    are stopped early depends on their metrics, so only these bounds are known in advance."""
    from determined.master.searchers._pbt import PBTConfig

    cfg = PBTConfig.from_section(section)
    plan = [_up_to(cfg.population_size, cfg.time_metric, cfg.num_rounds * cfg.length_per_round)]
    if cfg.num_truncate:
        for start in range(1, cfg.num_rounds):
            length = (cfg.num_rounds - start) * cfg.length_per_round
            plan.append(_up_to(cfg.num_truncate, cfg.time_metric, length))
    return plan


def _plan_plugin(section: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A searcher from a plugin (e.g. ``optuna``): how many trials, each up to the full length.

    Where it stops trials early depends on the metrics its model sees, so only these bounds are
    known without running it.
    """
    max_trials = get_int(section, "max_trials", None, 1)
    try:
        time_metric, max_time = get_length(section)
    except ValueError:
        return [_full_length(max_trials)]
    return [_up_to(max_trials, time_metric, max_time)]


def preview(config: Mapping[str, Any]) -> dict[str, Any]:
    """Simulate the search of ``config`` without running anything.

    Returns upstream's ``PreviewHPSearchResponse`` in its JSON form::

        {"summary": {"config": <the searcher section>,
                     "trials": [{"count": 53, "unit": {"name": "batches", "value": 15,
                                                       "maxLength": false}}, ...]}}

    ``single``/``random``/``grid`` train to the length defined in code (``{"maxLength": true}``);
    ``adaptive_asha`` lists how many trials stop at each rung length, shortest first.
    ``async_halving`` (refused by upstream) is planned as one bracket the same way. ``pbt`` and
    plugin searchers with ``max_trials`` (``optuna``) give bounds: how many trials, each training
    at most the given length (``"upTo": true`` in the unit; which trials stop early depends on
    their metrics).

    Raises:
        ValueError: the searcher section is invalid (naming the field).
    """
    from determined.master.searchers._adaptive_asha import make_brackets

    section = searcher_section(config)
    name = section.get("name")
    trials: list[dict[str, Any]]
    if name == "single":
        trials = [_full_length(1)]
    elif name == "random":
        trials = [_full_length(get_int(section, "max_trials", None, 1))]
    elif name == "grid":
        trials = [_full_length(grid_size(config.get("hyperparameters") or {}))]
    elif name in ("adaptive_asha", "async_halving"):
        time_metric, max_time = get_length(section)
        divisor = get_divisor(section)
        max_trials = get_int(section, "max_trials", None, 1)
        if name == "async_halving":
            plan = [(get_int(section, "num_rungs", None, 1), max_trials)]
        else:
            brackets: list[Bracket] = make_brackets(
                max_trials=max_trials,
                max_time=max_time,
                divisor=divisor,
                mode=str(section.get("mode") or "standard"),
                max_rungs=get_int(section, "max_rungs", 5, 1),
                bracket_rungs=_bracket_rungs(section),
                max_concurrent_trials=get_int(section, "max_concurrent_trials", 16, 0),
            )
            plan = [(b.num_rungs, b.max_trials) for b in brackets]
        trials = _plan_brackets(plan, divisor, time_metric, max_time)
    elif name == "pbt":
        trials = _plan_pbt(section)
    elif isinstance(name, str) and name and section.get("max_trials") is not None:
        trials = _plan_plugin(section)
    else:
        raise ValueError(f"searcher.name: cannot preview searcher {name!r}")
    return {"summary": {"config": copy.deepcopy(dict(section)), "trials": trials}}
