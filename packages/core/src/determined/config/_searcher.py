"""The ``searcher`` section: a union on ``name``, its per-searcher keys, defaults and legacy forms."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from determined.config import _checks as c
from determined.config._checks import Context, join

SEARCHERS = ("single", "random", "grid", "async_halving", "adaptive_asha", "pbt")
REMOVED_SEARCHERS = ("custom", "adaptive", "adaptive_simple", "sync_halving")
ASHA_SEARCHERS = ("async_halving", "adaptive_asha")
PLUGIN_SEARCHERS = {"optuna": "det-plugin-optuna"}
"""Searchers det knows of but does not ship: name -> the distribution that provides it."""

_MAX_LENGTH_REASON = (
    "training length now lives in the training code; ASHA searchers use time_metric and max_time"
)

_COMMON: dict[str, c.Checker] = {
    "name": c.anything(),  # checked on its own, first
    "metric": c.string(nonempty=True),
    "smaller_is_better": c.boolean(),
    "source_trial_id": c.integer(0),
    "source_checkpoint_uuid": c.string(),
    "max_length": c.deprecated(c.length(bare_int=True), _MAX_LENGTH_REASON),
}
_CONCURRENCY: dict[str, c.Checker] = {"max_concurrent_trials": c.integer(0)}
_ASHA: dict[str, c.Checker] = {
    "max_trials": c.integer(1),
    "divisor": c.number(above=1),
    "time_metric": c.string(nonempty=True),
    "max_time": c.integer(1),
    "stop_once": c.deprecated(c.boolean(), "every ASHA searcher is now stopping-based"),
    **_CONCURRENCY,
}


def _fraction(maximum: float) -> c.Checker:
    """A number in ``[0, maximum]``."""

    def check(ctx: Context, value: Any, path: str) -> None:
        if not c.is_number(value) or not 0 <= value <= maximum:
            ctx.error(path, f"must be a number between 0 and {maximum:g}, got {c.describe(value)}")

    return check


def _required_obj(fields: dict[str, c.Checker]) -> c.Checker:
    """A mapping with exactly ``fields``, every one of them required."""

    def check(ctx: Context, value: Any, path: str) -> None:
        if c.check_fields(ctx, value, path, fields):
            c.require(ctx, value, path, *fields)

    return check


FIELDS: dict[str, dict[str, c.Checker]] = {
    "single": dict(_COMMON),
    "random": {**_COMMON, "max_trials": c.integer(1), **_CONCURRENCY},
    "grid": {**_COMMON, **_CONCURRENCY},
    "async_halving": {**_COMMON, **_ASHA, "num_rungs": c.integer(1)},
    "adaptive_asha": {
        **_COMMON,
        **_ASHA,
        "mode": c.enum("aggressive", "standard", "conservative"),
        "max_rungs": c.integer(1),
        "bracket_rungs": c.list_of(c.integer(1)),
    },
    "pbt": {
        **_COMMON,
        "population_size": c.integer(1),
        "num_rounds": c.integer(1),
        "length_per_round": c.length(bare_int=True, positive=True),
        "time_metric": c.string(nonempty=True),
        "replace_function": _required_obj({"truncate_fraction": _fraction(0.5)}),
        "explore_function": _required_obj(
            {"resample_probability": _fraction(1.0), "perturb_factor": _fraction(1.0)}
        ),
    },
}
_ANY_SEARCHER = {key: check for fields in FIELDS.values() for key, check in fields.items()}

COMMON_KEYS = ("metric", "smaller_is_better", "source_trial_id", "source_checkpoint_uuid")

_REQUIRED = {
    "single": (),
    "random": ("max_trials",),
    "grid": (),
    "async_halving": ("num_rungs", "max_trials"),
    "adaptive_asha": ("max_trials",),
    "pbt": (
        "population_size",
        "num_rounds",
        "length_per_round",
        "replace_function",
        "explore_function",
    ),
}

_COMMON_DEFAULTS: dict[str, Any] = {
    "smaller_is_better": True,
    "source_trial_id": None,
    "source_checkpoint_uuid": None,
}
DEFAULTS: dict[str, dict[str, Any]] = {
    "single": {},
    "random": {"max_concurrent_trials": 16},
    "grid": {"max_concurrent_trials": 16},
    "async_halving": {
        "divisor": 4,
        "max_concurrent_trials": 16,
        "time_metric": None,
        "max_time": None,
    },
    "adaptive_asha": {
        "mode": "standard",
        "divisor": 4,
        "max_rungs": 5,
        "bracket_rungs": [],
        "max_concurrent_trials": 16,
        "time_metric": None,
        "max_time": None,
    },
    "pbt": {},
}


def check_searcher(ctx: Context, value: Any, path: str) -> None:
    """Check a ``searcher`` block; in phase 2 also its eventually-required keys."""
    if not isinstance(value, Mapping):
        ctx.error(path, f"must be a mapping, got {c.describe(value)}")
        return
    name = value.get("name")
    if name is None:
        # A partial block (the rest may come from a template): only keys some searcher knows.
        c.check_fields(ctx, value, path, _ANY_SEARCHER)
        if ctx.complete:
            ctx.error(join(path, "name"), "required")
        return
    if name in REMOVED_SEARCHERS:
        ctx.error(
            join(path, "name"),
            f"the {name!r} searcher has been removed and is not valid for new experiments",
        )
        return
    if name not in SEARCHERS:
        if isinstance(name, str) and name and _plugin_implements(value):
            # A third-party searcher: its own keys are its plugin's business; the common ones are
            # checked here, and the master reports what the plugin refuses when it builds it.
            ctx.searcher_name = name
            for key, check in _COMMON.items():
                if key != "name" and value.get(key) is not None:
                    check(ctx, value[key], join(path, key))
            if ctx.complete:
                c.require(ctx, value, path, "metric")
            return
        if name in PLUGIN_SEARCHERS:
            ctx.error(join(path, "name"), plugin_missing(str(name)))
            return
        ctx.error(join(path, "name"), f"must be one of {', '.join(SEARCHERS)}")
        return
    ctx.searcher_name = name
    c.check_fields(ctx, value, path, FIELDS[name], unknown=f"unknown field for the {name} searcher")
    if ctx.complete:
        c.require(ctx, value, path, "metric")
        c.require(ctx, value, path, *_REQUIRED[name], why=f" for the {name} searcher")
        if name in ASHA_SEARCHERS:
            c.require(ctx, value, path, "time_metric", "max_time", why=f" for the {name} searcher")


def plugin_missing(name: str) -> str:
    """The error for a known plugin searcher whose distribution is not installed."""
    dist = PLUGIN_SEARCHERS[name]
    return (
        f"the {name!r} searcher is provided by {dist}, which is not installed: pip install {dist}"
    )


def _plugin_implements(section: Mapping[str, Any]) -> bool:
    """Whether an installed searcher plugin (entry-point group ``determined``) implements
    ``section["name"]``; asked only for names det does not ship, so checking a built-in searcher
    loads no plugin."""
    from determined.core import _hooks

    try:
        _hooks.get_plugin_manager()
    except Exception:
        return False  # no plugins can be loaded: only det's own names are known
    try:
        _hooks.search_method({"searcher": dict(section), "hyperparameters": {}})
    except ValueError as exc:
        # Nobody implements the name, or a plugin that does refused this (maybe partial) section.
        return not str(exc).startswith("searcher.name: no searcher plugin implements")
    except Exception:
        return True  # a plugin recognised the name but cannot build from this section yet
    return True


def fill_searcher(searcher: Mapping[str, Any], warnings: list[str]) -> dict[str, Any]:
    """Apply per-searcher defaults; derive ASHA's time_metric/max_time from a legacy max_length."""
    result = dict(searcher)
    name = result.get("name")
    if name not in DEFAULTS:
        return result
    for key, default in {**_COMMON_DEFAULTS, **DEFAULTS[name]}.items():
        if result.get(key) is None:
            result[key] = list(default) if isinstance(default, list) else default
    if (
        name in ASHA_SEARCHERS
        and result.get("time_metric") is None
        and result.get("max_time") is None
    ):
        legacy = searcher_length({"searcher": result})
        if legacy is not None:
            result["time_metric"], result["max_time"] = legacy
            warnings.append(
                f"searcher.max_length: deprecated, read as time_metric={legacy[0]!r} and "
                f"max_time={legacy[1]}; set those instead (training code must report "
                f"{legacy[0]!r} in its validation metrics)"
            )
    return result


def searcher_length(config: Mapping[str, Any]) -> tuple[str, int] | None:
    """The legacy ``searcher.max_length`` as ``(unit, value)``, e.g. ``("batches", 100)``.

    A bare integer counts batches. Returns None when the field is absent or malformed.
    """
    searcher = config.get("searcher")
    if not isinstance(searcher, Mapping):
        return None
    max_length = searcher.get("max_length")
    if isinstance(max_length, int) and not isinstance(max_length, bool):
        return ("batches", max_length)
    if isinstance(max_length, Mapping) and len(max_length) == 1:
        unit, amount = next(iter(max_length.items()))
        if unit in c.LENGTH_UNITS and isinstance(amount, int) and not isinstance(amount, bool):
            return (str(unit), amount)
    return None
