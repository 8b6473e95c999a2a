"""Small building blocks for validating a parsed config: typed checkers that collect errors by path.

A checker is a callable ``(ctx, value, path) -> None`` that appends ``"<path>: <message>"`` to
``ctx.errors`` for every problem it finds. Checkers are never called with ``None``: ``null`` means
"not provided" everywhere, so the caller skips it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

ROOT = "<config>"


class Context:
    """What one validation pass collects, and what it needs to know about the whole config.

    Args:
        complete: True in phase 2 (after defaults), when eventually-required fields are enforced.
        warn: whether deprecation warnings are recorded (only for the user's own config).
    """

    def __init__(self, *, complete: bool, warn: bool = False) -> None:
        self.complete = complete
        self.record_warnings = warn
        self.errors: list[str] = []
        self.warnings: list[str] = []
        self.searcher_name: str | None = None

    def error(self, path: str, message: str) -> None:
        self.errors.append(f"{path or ROOT}: {message}")

    def warn(self, path: str, message: str) -> None:
        if self.record_warnings:
            self.warnings.append(f"{path or ROOT}: {message}")


Checker = Callable[[Context, Any, str], None]


def join(path: str, key: object) -> str:
    """The path of ``key`` inside ``path``: ``a.b`` for a mapping key, ``a[0]`` for a list index."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else str(key)


def describe(value: object) -> str:
    """A short rendering of a wrong value for an error message."""
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list | tuple):
        return "a list"
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def string(*, nonempty: bool = False) -> Checker:
    def check(ctx: Context, value: Any, path: str) -> None:
        if not isinstance(value, str):
            ctx.error(path, f"must be a string, got {describe(value)}")
        elif nonempty and not value:
            ctx.error(path, "must not be empty")

    return check


def boolean() -> Checker:
    def check(ctx: Context, value: Any, path: str) -> None:
        if not isinstance(value, bool):
            ctx.error(path, f"must be a boolean, got {describe(value)}")

    return check


def _range(ctx: Context, value: float, path: str, low: float | None, high: float | None) -> None:
    if low is not None and high is not None and not low <= value <= high:
        ctx.error(path, f"must be between {low} and {high}")
    elif low is not None and value < low:
        ctx.error(path, f"must be ≥ {low}")
    elif high is not None and value > high:
        ctx.error(path, f"must be ≤ {high}")


def integer(low: int | None = None, high: int | None = None) -> Checker:
    def check(ctx: Context, value: Any, path: str) -> None:
        if not is_int(value):
            ctx.error(path, f"must be an integer, got {describe(value)}")
        else:
            _range(ctx, value, path, low, high)

    return check


def number(low: float | None = None, *, above: float | None = None) -> Checker:
    """A number ≥ ``low``, or strictly greater than ``above``."""

    def check(ctx: Context, value: Any, path: str) -> None:
        if not is_number(value):
            ctx.error(path, f"must be a number, got {describe(value)}")
        elif above is not None and value <= above:
            ctx.error(path, f"must be > {above}")
        else:
            _range(ctx, value, path, low, None)

    return check


def enum(*choices: str) -> Checker:
    def check(ctx: Context, value: Any, path: str) -> None:
        if not isinstance(value, str) or value not in choices:
            ctx.error(path, f"must be one of {', '.join(choices)}, got {describe(value)}")

    return check


def anything() -> Checker:
    def check(ctx: Context, value: Any, path: str) -> None:
        return None

    return check


def mapping_any() -> Checker:
    """A free-form mapping (its contents are not checked)."""

    def check(ctx: Context, value: Any, path: str) -> None:
        if not isinstance(value, Mapping):
            ctx.error(path, f"must be a mapping, got {describe(value)}")

    return check


def list_of(item: Checker) -> Checker:
    def check(ctx: Context, value: Any, path: str) -> None:
        if not isinstance(value, list):
            ctx.error(path, f"must be a list, got {describe(value)}")
            return
        for index, element in enumerate(value):
            if element is None:
                ctx.error(join(path, index), "must not be null")
            else:
                item(ctx, element, join(path, index))

    return check


def map_of(item: Checker) -> Checker:
    def check(ctx: Context, value: Any, path: str) -> None:
        if not isinstance(value, Mapping):
            ctx.error(path, f"must be a mapping, got {describe(value)}")
            return
        for key, element in value.items():
            if not isinstance(key, str):
                ctx.error(path, f"keys must be strings, got {describe(key)}")
            elif element is not None:
                item(ctx, element, join(path, key))

    return check


_NO_DEFAULT: Any = object()


def deprecated(item: Checker, reason: str, default: Any = _NO_DEFAULT) -> Checker:
    """Accept the field as ``item`` does, with a deprecation warning.

    No warning when the value changes nothing: equal to ``default`` (for a mapping default, every key
    that is set equals the default's), so a stored, fully defaulted config validates without warnings.
    """

    def check(ctx: Context, value: Any, path: str) -> None:
        if isinstance(default, Mapping) and isinstance(value, Mapping):
            changes = any(
                v is not None and default.get(k, _NO_DEFAULT) != v for k, v in value.items()
            )
        else:
            changes = value != default
        if changes:
            ctx.warn(path, f"deprecated, {reason}")
        item(ctx, value, path)

    return check


def check_fields(
    ctx: Context,
    value: Any,
    path: str,
    fields: Mapping[str, Checker],
    *,
    disallowed: Mapping[str, str] | None = None,
    unknown: str = "unknown field",
) -> bool:
    """Check a mapping against a field table; return False when ``value`` is not a mapping.

    Unknown keys are errors (nothing is silently dropped); ``disallowed`` maps a key to its own message.
    """
    if not isinstance(value, Mapping):
        ctx.error(path, f"must be a mapping, got {describe(value)}")
        return False
    for key, element in value.items():
        if not isinstance(key, str):
            ctx.error(path, f"keys must be strings, got {describe(key)}")
        elif disallowed and key in disallowed:
            ctx.error(join(path, key), disallowed[key])
        elif key not in fields:
            ctx.error(join(path, key), unknown)
        elif element is not None:
            fields[key](ctx, element, join(path, key))
    return True


def obj(fields: Mapping[str, Checker], **kwargs: Any) -> Checker:
    """A checker for a mapping with the given field table (see :func:`check_fields`)."""

    def check(ctx: Context, value: Any, path: str) -> None:
        check_fields(ctx, value, path, fields, **kwargs)

    return check


def require(ctx: Context, value: Mapping[str, Any], path: str, *keys: str, why: str = "") -> None:
    """Report each of ``keys`` that is missing or null in ``value`` as required."""
    for key in keys:
        if value.get(key) is None:
            ctx.error(join(path, key), f"required{why}")


LENGTH_UNITS = ("batches", "records", "epochs")


def length(*, bare_int: bool = False, positive: bool = False) -> Checker:
    """A Length object: exactly one of batches/records/epochs, an integer ≥ 0 (≥ 1 if ``positive``)."""
    minimum = 1 if positive else 0

    def check(ctx: Context, value: Any, path: str) -> None:
        if bare_int and is_int(value):
            _range(ctx, value, path, minimum, None)
            return
        if (
            not isinstance(value, Mapping)
            or len(value) != 1
            or next(iter(value)) not in LENGTH_UNITS
        ):
            ctx.error(path, 'must have exactly one of "batches", "records", or "epochs"')
            return
        unit, amount = next(iter(value.items()))
        if amount is None:
            ctx.error(join(path, unit), "must not be null")
        else:
            integer(minimum)(ctx, amount, join(path, unit))

    return check
