"""Hyperparameter sampling and grids, bit-compatible with Determined's master.

A ``hyperparameters`` section maps names to one of:

- ``{"type": "const", "val": v}``, or any value that is not a dict (shorthand for a const);
- ``{"type": "int", "minval": a, "maxval": b, "count"?: n}`` (inclusive bounds);
- ``{"type": "double", "minval": a, "maxval": b, "count"?: n}`` (``[a, b)``);
- ``{"type": "log", "minval": a, "maxval": b, "base": B, "count"?: n}`` (``B ** x``, x in ``[a, b)``);
- ``{"type": "categorical", "vals": [...]}``;
- a dict without ``type``: a nested section, sampled recursively.

Names are visited in sorted order at every level. Upstream sorted only the top level and walked nested
sections in Go map order (random); sorting nested names too makes every draw reproducible, and gives the
same values as upstream whenever a nested section holds at most one random hyperparameter.
"""

from __future__ import annotations

import copy
import itertools
import math
import uuid
from collections.abc import Mapping
from typing import Any

from determined.searcher._actions import Create
from determined.searcher._nprand import RandomState

_TYPES = ("const", "int", "double", "log", "categorical")


def _is_nested(spec: Any) -> bool:
    return isinstance(spec, Mapping) and "type" not in spec


def _field(spec: Mapping[str, Any], key: str, path: str) -> Any:
    if key not in spec:
        raise ValueError(f"hyperparameters.{path}.{key}: required for type {spec['type']!r}")
    return spec[key]


def _number(spec: Mapping[str, Any], key: str, path: str) -> float:
    value = _field(spec, key, path)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"hyperparameters.{path}.{key}: expected a number, got {value!r}")
    return float(value)


def _integer(spec: Mapping[str, Any], key: str, path: str) -> int:
    value = _field(spec, key, path)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"hyperparameters.{path}.{key}: expected an integer, got {value!r}")
    return value


def _bounds(spec: Mapping[str, Any], path: str, integer: bool) -> tuple[Any, Any]:
    get = _integer if integer else _number
    low, high = get(spec, "minval", path), get(spec, "maxval", path)
    if not low < high:
        raise ValueError(
            f"hyperparameters.{path}.maxval: must be greater than minval ({low}), got {high}"
        )
    return low, high


def _kind(spec: Any, path: str) -> str:
    kind = spec["type"]
    if kind not in _TYPES:
        raise ValueError(
            f"hyperparameters.{path}.type: expected one of {', '.join(_TYPES)}, got {kind!r}"
        )
    return str(kind)


def _categorical_vals(spec: Mapping[str, Any], path: str) -> list[Any]:
    vals = _field(spec, "vals", path)
    if not isinstance(vals, list) or not vals:
        raise ValueError(f"hyperparameters.{path}.vals: expected a non-empty list, got {vals!r}")
    return vals


def sample_one(spec: Any, rng: RandomState, path: str = "") -> Any:
    """Draw one value for the hyperparameter ``spec`` (see the module docstring for the forms).

    Args:
        spec: one entry of a ``hyperparameters`` section.
        rng: the searcher's generator; draws are consumed exactly as upstream's master does.
        path: the dotted name used in error messages.
    """
    if _is_nested(spec):
        return {
            name: sample_one(spec[name], rng, f"{path}.{name}" if path else name)
            for name in sorted(spec)
        }
    if not isinstance(spec, Mapping):
        return copy.deepcopy(spec)
    kind = _kind(spec, path)
    if kind == "const":
        return copy.deepcopy(spec.get("val"))
    if kind == "int":
        low, high = _bounds(spec, path, integer=True)
        return low + rng.intn(high - low + 1)
    if kind == "double":
        low, high = _bounds(spec, path, integer=False)
        return rng.uniform(low, high)
    if kind == "log":
        low, high = _bounds(spec, path, integer=False)
        return _number(spec, "base", path) ** rng.uniform(low, high)
    vals = _categorical_vals(spec, path)
    return copy.deepcopy(vals[rng.intn(len(vals))])


def sample_hparams(hyperparameters: Mapping[str, Any], rng: RandomState) -> dict[str, Any]:
    """Draw a full hyperparameter sample, visiting names in sorted order at every level."""
    return {name: sample_one(hyperparameters[name], rng, name) for name in sorted(hyperparameters)}


def new_request_id(rng: RandomState) -> str:
    """A UUIDv4 string from 16 bytes of ``rng`` (four 32-bit draws, little-endian each)."""
    raw = bytearray(rng.read(16))
    raw[6] = (raw[6] & 0x0F) | 0x40
    raw[8] = (raw[8] & 0x3F) | 0x80
    return str(uuid.UUID(bytes=bytes(raw)))


def new_create(rng: RandomState, hparams: dict[str, Any]) -> Create:
    """A :class:`Create` for ``hparams``: request id first, then ``trial_seed`` in ``[0, 2**31)``.

    Sample the hyperparameters *before* calling this to consume draws in upstream's order.
    """
    request_id = new_request_id(rng)
    return Create(request_id=request_id, trial_seed=rng.int64n(1 << 31), hparams=hparams)


def round_half_away(value: float) -> int:
    """Round to the nearest integer, halves away from zero (Go's ``math.Round``; not banker's)."""
    truncated = math.trunc(value)
    if abs(value - truncated) >= 0.5:
        truncated += 1 if value > 0 else -1
    return int(truncated)


def _count(spec: Mapping[str, Any], path: str) -> int:
    if "count" not in spec or spec["count"] is None:
        raise ValueError(f"hyperparameters.{path}.count: grid search needs a count for {path}")
    count = _integer(spec, "count", path)
    if count < 1:
        raise ValueError(f"hyperparameters.{path}.count: must be at least 1, got {count}")
    return count


def grid_axis(spec: Any, path: str = "") -> list[Any]:
    """The grid points of one non-nested hyperparameter, in order.

    int: ``count`` is clamped to the number of integers in range, points are rounded half away from
    zero (1..10, count 4 gives 1, 4, 7, 10; count 1 gives the midpoint 6). double: evenly spaced,
    ends included (count 1: the midpoint). log: evenly spaced exponents. categorical: every value.
    """
    if not isinstance(spec, Mapping):
        return [spec]
    kind = _kind(spec, path)
    if kind == "const":
        return [spec.get("val")]
    if kind == "categorical":
        return list(_categorical_vals(spec, path))
    count = _count(spec, path)
    if kind == "int":
        low, high = _bounds(spec, path, integer=True)
        count = min(count, high - low + 1)
        if count == 1:
            return [round_half_away(float(low + high) / 2.0)]
        return [
            round_half_away(float(low) + float(i * (high - low)) / float(count - 1))
            for i in range(count)
        ]
    low, high = _bounds(spec, path, integer=False)
    if count == 1:
        exponents = [(low + high) / 2.0]
    else:
        exponents = [low + float(i) * (high - low) / float(count - 1) for i in range(count)]
    if kind == "double":
        return exponents
    base = _number(spec, "base", path)
    return [base**x for x in exponents]


def _axes(spec: Any, route: tuple[str, ...]) -> list[tuple[tuple[str, ...], list[Any]]]:
    if _is_nested(spec):
        if not spec:
            return [(route, [{}])]
        out: list[tuple[tuple[str, ...], list[Any]]] = []
        for name in sorted(spec):
            out.extend(_axes(spec[name], (*route, name)))
        return out
    return [(route, grid_axis(spec, ".".join(route)))]


def hparam_grid(hyperparameters: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every point of the grid: one axis per leaf (names sorted), the first axis varying slowest.

    An empty ``hyperparameters`` section gives one point, ``{}`` (upstream gave none).
    """
    axes: list[tuple[tuple[str, ...], list[Any]]] = []
    for name in sorted(hyperparameters):
        axes.extend(_axes(hyperparameters[name], (name,)))
    points = []
    for values in itertools.product(*(axis for _, axis in axes)):
        point: dict[str, Any] = {}
        for (route, _), value in zip(axes, values, strict=True):
            node = point
            for key in route[:-1]:
                node = node.setdefault(key, {})
            node[route[-1]] = copy.deepcopy(value)
        points.append(point)
    return points


def _axis_length(spec: Any, path: str) -> int:
    if not isinstance(spec, Mapping):
        return 1
    kind = _kind(spec, path)
    if kind == "const":
        return 1
    if kind == "categorical":
        return len(_categorical_vals(spec, path))
    count = _count(spec, path)
    if kind == "int":
        low, high = _bounds(spec, path, integer=True)
        return int(max(min(count, high - low + 1), 1))
    return count


def _leaf_lengths(spec: Any, route: tuple[str, ...]) -> list[int]:
    if _is_nested(spec):
        out: list[int] = []
        for name in sorted(spec):
            out.extend(_leaf_lengths(spec[name], (*route, name)))
        return out
    return [_axis_length(spec, ".".join(route))]


def grid_size(hyperparameters: Mapping[str, Any]) -> int:
    """How many points :func:`hparam_grid` would give, computed without enumerating any.

    The product of each leaf's axis length (``count``, clamped to the integers in range for
    ``int``; the number of values for ``categorical``; 1 for ``const``), nested sections
    included. Masters use it to refuse a grid too big to enumerate (28 axes of 10 is 10**28).

    Raises:
        ValueError: a leaf is malformed (no ``count``, bad bounds), naming its path.
    """
    lengths: list[int] = []
    for name in sorted(hyperparameters):
        lengths.extend(_leaf_lengths(hyperparameters[name], (name,)))
    return math.prod(lengths)
