"""Hyperparameter definitions: checking, normalising shorthand consts, and flattening to dotted keys."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from determined.config._checks import Context, describe, integer, is_int, is_number, join, number

HP_TYPES = ("const", "int", "double", "log", "categorical")
_COUNTED = ("int", "double", "log")

_KEYS = {
    "const": ("type", "val"),
    "int": ("type", "minval", "maxval", "count"),
    "double": ("type", "minval", "maxval", "count"),
    "log": ("type", "minval", "maxval", "base", "count"),
    "categorical": ("type", "vals"),
}


def is_definition(value: object) -> bool:
    """Whether ``value`` is one typed hyperparameter (as opposed to a nested dict of them)."""
    return isinstance(value, Mapping) and value.get("type") is not None


def check_hyperparameters(ctx: Context, value: Any, path: str) -> None:
    """Check a ``hyperparameters`` mapping (or a nested dict of hyperparameters) recursively."""
    if not isinstance(value, Mapping):
        ctx.error(
            path, f"must be a mapping of hyperparameter names to definitions, got {describe(value)}"
        )
        return
    for name, hp in value.items():
        if not isinstance(name, str):
            ctx.error(path, f"hyperparameter names must be strings, got {describe(name)}")
        elif isinstance(hp, Mapping):
            if is_definition(hp):
                _check_definition(ctx, hp, join(path, name))
            else:
                check_hyperparameters(ctx, hp, join(path, name))
        # Anything else (number, string, list, null) is a shorthand const.


def _check_definition(ctx: Context, hp: Mapping[str, Any], path: str) -> None:
    kind = hp["type"]
    if kind not in HP_TYPES:
        ctx.error(join(path, "type"), f"must be one of {', '.join(HP_TYPES)}, got {describe(kind)}")
        return
    for key in hp:
        if key not in _KEYS[kind]:
            ctx.error(join(path, str(key)), f"unknown field for a {kind} hyperparameter")
    if kind == "const":
        if "val" not in hp:
            ctx.error(join(path, "val"), "required")
        return
    if kind == "categorical":
        vals = hp.get("vals")
        if vals is None:
            ctx.error(join(path, "vals"), "required")
        elif not isinstance(vals, list):
            ctx.error(join(path, "vals"), f"must be a list, got {describe(vals)}")
        elif not vals:
            ctx.error(join(path, "vals"), "must not be empty")
        return
    valid = is_int if kind == "int" else is_number
    noun = "an integer" if kind == "int" else "a number"
    bounds_ok = True
    for key in ("minval", "maxval"):
        bound = hp.get(key)
        if bound is None:
            ctx.error(join(path, key), "required")
            bounds_ok = False
        elif not valid(bound):
            ctx.error(join(path, key), f"must be {noun}, got {describe(bound)}")
            bounds_ok = False
    if bounds_ok and not hp["minval"] < hp["maxval"]:
        ctx.error(join(path, "minval"), "must be less than maxval")
    if hp.get("count") is not None:
        integer(1)(ctx, hp["count"], join(path, "count"))
    if kind == "log":
        if hp.get("base") is None:
            ctx.error(join(path, "base"), "required")
        else:
            number(above=0)(ctx, hp["base"], join(path, "base"))


def check_grid_counts(ctx: Context, value: Any, path: str) -> None:
    """Grid search needs ``count`` on every int/double/log hyperparameter, nested ones included."""
    if isinstance(value, list):
        for index, element in enumerate(value):
            check_grid_counts(ctx, element, join(path, index))
        return
    if not isinstance(value, Mapping):
        return
    if is_definition(value):
        if value.get("type") in _COUNTED and value.get("count") is None:
            ctx.error(join(path, "count"), "required when the grid searcher is in use")
        elif value.get("type") == "const":
            check_grid_counts(ctx, value.get("val"), join(path, "val"))
        return
    for name, hp in value.items():
        check_grid_counts(ctx, hp, join(path, str(name)))


def normalize_hyperparameters(hparams: Mapping[str, Any]) -> dict[str, Any]:
    """Turn shorthand consts into ``{"type": "const", "val": ...}``; keep nested dicts (even empty)."""
    result: dict[str, Any] = {}
    for name, hp in hparams.items():
        if is_definition(hp):
            result[name] = dict(hp)
        elif isinstance(hp, Mapping):
            result[name] = normalize_hyperparameters(hp)
        else:
            result[name] = {"type": "const", "val": hp}
    return result


def flatten_hparams(hparams: Mapping[str, Any]) -> dict[str, Any]:
    """Flatten nested hyperparameters to dotted keys: ``{"optimizer": {"lr": x}}`` → ``{"optimizer.lr": x}``.

    Works on definitions (a typed hyperparameter is a leaf) and on sampled values (any non-mapping is a
    leaf). Empty nested dicts contribute no key.
    """
    flat: dict[str, Any] = {}
    for name, value in hparams.items():
        if isinstance(value, Mapping) and not _is_typed_leaf(value):
            for sub, leaf in flatten_hparams(value).items():
                flat[f"{name}.{sub}"] = leaf
        else:
            flat[str(name)] = value
    return flat


def _is_typed_leaf(value: Mapping[str, Any]) -> bool:
    return value.get("type") in HP_TYPES and set(value) <= set(_KEYS[value["type"]])
