"""det's ``hyperparameters`` section as an Optuna search space, and back.

det nests hyperparameters (a dict without ``type`` is a section); Optuna wants a flat mapping of
names to distributions. :class:`SearchSpace` flattens the section once (``opt.momentum`` for
``{"opt": {"momentum": ...}}``), keeps constants aside, and rebuilds the nested dict a trial gets
from the flat parameters Optuna proposes.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import optuna.distributions as od

HP_TYPES = ("const", "int", "double", "log", "categorical")


@dataclass(frozen=True)
class Param:
    """One searched hyperparameter: where it sits in the nested section and how Optuna draws it.

    Categoricals are drawn as an index into ``vals``, so any JSON value (lists, dicts, a mix of
    ``True`` and ``1``) can be a choice.
    """

    name: str
    path: tuple[str, ...]
    kind: str
    distribution: od.BaseDistribution
    vals: tuple[Any, ...] = ()

    def to_value(self, param: Any) -> Any:
        """The value the trial sees for Optuna's ``param``."""
        if self.kind == "int":
            return int(param)
        if self.kind == "categorical":
            return copy.deepcopy(self.vals[int(param)])
        return float(param)


def _number(spec: Mapping[str, Any], key: str, where: str, integer: bool = False) -> float:
    if key not in spec:
        raise ValueError(f"hyperparameters.{where}.{key}: required for type {spec['type']!r}")
    value = spec[key]
    if integer and isinstance(value, float) and value.is_integer():
        value = int(value)
    allowed = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, allowed):
        kind = "an integer" if integer else "a number"
        raise ValueError(f"hyperparameters.{where}.{key}: expected {kind}, got {value!r}")
    return value


def _bounds(spec: Mapping[str, Any], where: str, integer: bool = False) -> tuple[Any, Any]:
    low = _number(spec, "minval", where, integer)
    high = _number(spec, "maxval", where, integer)
    if not low < high:
        raise ValueError(
            f"hyperparameters.{where}.maxval: must be greater than minval ({low}), got {high}"
        )
    return low, high


def _param(name: str, path: tuple[str, ...], spec: Mapping[str, Any]) -> Param:
    kind = spec["type"]
    if kind == "int":
        low, high = _bounds(spec, name, integer=True)
        return Param(name, path, kind, od.IntDistribution(int(low), int(high)))
    if kind == "double":
        low, high = _bounds(spec, name)
        return Param(name, path, kind, od.FloatDistribution(float(low), float(high)))
    if kind == "log":
        low, high = _bounds(spec, name)
        base = _number(spec, "base", name) if "base" in spec else 10.0
        if not base > 0 or base == 1:
            raise ValueError(
                f"hyperparameters.{name}.base: expected a number > 0 and != 1, got {base}"
            )
        # base**x for a uniform x is log-uniform in the value, whatever the base.
        ends = sorted((float(base) ** float(low), float(base) ** float(high)))
        return Param(name, path, kind, od.FloatDistribution(ends[0], ends[1], log=True))
    vals = spec.get("vals")
    if not isinstance(vals, list) or not vals:
        raise ValueError(f"hyperparameters.{name}.vals: expected a non-empty list, got {vals!r}")
    return Param(name, path, kind, od.CategoricalDistribution(list(range(len(vals)))), tuple(vals))


class SearchSpace:
    """The searched hyperparameters of a det ``hyperparameters`` section, flattened for Optuna.

    Args:
        hyperparameters: the experiment config's ``hyperparameters`` section.

    Raises:
        ValueError: a hyperparameter is malformed; the message names it (``hyperparameters.x.maxval``).
    """

    def __init__(self, hyperparameters: Mapping[str, Any]) -> None:
        if not isinstance(hyperparameters, Mapping):
            raise ValueError(f"hyperparameters: expected a mapping, got {hyperparameters!r}")
        self.hyperparameters = hyperparameters
        self.params: dict[str, Param] = {}
        self._walk(hyperparameters, ())

    def _walk(self, section: Mapping[str, Any], path: tuple[str, ...]) -> None:
        for key in sorted(section):
            spec = section[key]
            where = (*path, str(key))
            name = ".".join(where)
            if not isinstance(spec, Mapping):
                continue  # a bare value is a constant
            if "type" not in spec:
                self._walk(spec, where)
                continue
            kind = spec["type"]
            if kind not in HP_TYPES:
                raise ValueError(
                    f"hyperparameters.{name}.type: expected one of {', '.join(HP_TYPES)}, "
                    f"got {kind!r}"
                )
            if kind == "const":
                if "val" not in spec:
                    raise ValueError(f"hyperparameters.{name}.val: required for type 'const'")
                continue
            if name in self.params:
                raise ValueError(
                    f"hyperparameters.{name}: two hyperparameters flatten to the same name"
                )
            self.params[name] = _param(name, where, spec)

    @property
    def distributions(self) -> dict[str, od.BaseDistribution]:
        """Optuna's distributions by flat name, in sorted order."""
        return {name: param.distribution for name, param in self.params.items()}

    def to_hparams(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """The nested hyperparameters of a trial for Optuna's flat ``params`` (constants included)."""
        return self._build(self.hyperparameters, (), params)

    def _build(
        self, section: Mapping[str, Any], path: tuple[str, ...], params: Mapping[str, Any]
    ) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key in sorted(section):
            spec = section[key]
            where = (*path, str(key))
            if not isinstance(spec, Mapping):
                out[key] = copy.deepcopy(spec)
            elif "type" not in spec:
                out[key] = self._build(spec, where, params)
            elif spec["type"] == "const":
                out[key] = copy.deepcopy(spec["val"])
            else:
                name = ".".join(where)
                out[key] = self.params[name].to_value(params[name])
        return out
