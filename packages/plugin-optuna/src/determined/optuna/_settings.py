"""The ``optuna`` searcher's config: its fields, defaults and the errors that name them.

The section reads like det's other searchers (``metric``, ``smaller_is_better``, ``max_trials``,
``max_concurrent_trials``, ``time_metric`` + ``max_time`` or the legacy ``max_length``) plus the
sampler and the early stopping::

    searcher:
      name: optuna
      sampler: tpe            # tpe | cmaes | gp | random | qmc
      metric: validation_loss
      max_trials: 64
      time_metric: batches
      max_time: 1000
      pruner: {type: asha, divisor: 4, max_rungs: 5}
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

SAMPLERS = ("tpe", "cmaes", "gp", "random", "qmc")
PRUNERS = ("asha", "adaptive_asha", "hyperband", "median", "none")
DEFAULT_MAX_CONCURRENT_TRIALS = 16

_TOP_FIELDS = {
    "name",
    "metric",
    "smaller_is_better",
    "sampler",
    "n_startup_trials",
    "seed",
    "max_trials",
    "max_concurrent_trials",
    "time_metric",
    "max_time",
    "max_length",
    "pruner",
    "source_trial_id",
    "source_checkpoint_uuid",
}
_PRUNER_FIELDS = {
    "asha": {"type", "divisor", "max_rungs"},
    "adaptive_asha": {"type", "divisor", "max_rungs", "mode", "bracket_rungs"},
    "hyperband": {"type", "min_resource", "reduction_factor"},
    "median": {"type", "n_startup_trials", "n_warmup_steps", "num_checks"},
    "none": {"type"},
}
_PRUNER_DEFAULTS: dict[str, dict[str, Any]] = {
    "asha": {"divisor": 4, "max_rungs": 5},
    "adaptive_asha": {"divisor": 4, "max_rungs": 5, "mode": "standard", "bracket_rungs": []},
    "hyperband": {"min_resource": 1, "reduction_factor": 3},
    "median": {"n_startup_trials": 5, "n_warmup_steps": 0, "num_checks": 5},
    "none": {},
}


@dataclass
class Settings:
    """A checked ``optuna`` searcher section, with defaults applied."""

    metric: str
    smaller_is_better: bool
    sampler: str
    n_startup_trials: int | None
    seed: int
    max_trials: int
    max_concurrent_trials: int
    time_metric: str | None
    max_time: int | None
    pruner: dict[str, Any] = field(default_factory=dict)

    @property
    def pruner_type(self) -> str:
        return str(self.pruner["type"])


def _int(
    section: Mapping[str, Any], key: str, default: int | None, minimum: int, where: str
) -> int:
    value = section.get(key)
    if value is None:
        if default is None:
            raise ValueError(f"{where}.{key}: required for the optuna searcher")
        return default
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{where}.{key}: expected an integer >= {minimum}, got {value!r}")
    return value


def _unknown(section: Mapping[str, Any], allowed: set[str], where: str, what: str) -> None:
    extra = sorted(set(section) - allowed)
    if extra:
        raise ValueError(
            f"{where}.{extra[0]}: unknown field for {what} (known: {', '.join(sorted(allowed))})"
        )


def _length(section: Mapping[str, Any]) -> tuple[str, int]:
    """``(time_metric, max_time)``, as det's ASHA searchers read them: ``time_metric`` +
    ``max_time`` win; else the legacy ``max_length`` (``{batches: N}``, or N in ``time_metric``)."""
    time_metric = section.get("time_metric")
    if section.get("max_time") is not None:
        if not isinstance(time_metric, str) or not time_metric:
            raise ValueError(f"searcher.time_metric: required with max_time, got {time_metric!r}")
        return time_metric, _int(section, "max_time", None, 1, "searcher")
    legacy = section.get("max_length")
    if isinstance(legacy, Mapping):
        if len(legacy) != 1:
            raise ValueError(
                f"searcher.max_length: expected one unit like {{'batches': 100}}, got {legacy!r}"
            )
        ((unit, units),) = legacy.items()
        return str(unit), _int({"max_length": units}, "max_length", None, 1, "searcher")
    return str(time_metric or "batches"), _int(section, "max_length", None, 1, "searcher")


def _pruner(raw: Any, has_length: bool) -> dict[str, Any]:
    where = "searcher.pruner"
    if raw is None:
        raw = {"type": "asha" if has_length else "none"}
    if isinstance(raw, str):
        raw = {"type": raw}
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where}: expected a mapping like {{type: asha}}, got {raw!r}")
    kind = raw.get("type")
    if kind not in PRUNERS:
        raise ValueError(f"{where}.type: expected one of {', '.join(PRUNERS)}, got {kind!r}")
    _unknown(raw, _PRUNER_FIELDS[kind], where, f"the {kind} pruner")
    if kind != "none" and not has_length:
        raise ValueError(
            f"{where}.type: the {kind} pruner needs searcher.time_metric and searcher.max_time"
        )
    pruner = {**_PRUNER_DEFAULTS[kind], **{k: v for k, v in raw.items() if v is not None}}
    for key in ("max_rungs", "num_checks", "min_resource"):
        if key in pruner:
            pruner[key] = _int(pruner, key, None, 1, where)
    for key in ("n_startup_trials", "n_warmup_steps"):
        if key in pruner:
            pruner[key] = _int(pruner, key, None, 0, where)
    for key in ("divisor", "reduction_factor"):
        if key in pruner:
            value = pruner[key]
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 1:
                raise ValueError(f"{where}.{key}: expected a number > 1, got {value!r}")
    if kind == "hyperband" and not isinstance(pruner["reduction_factor"], int):
        raise ValueError(
            f"{where}.reduction_factor: expected an integer > 1, got {pruner['reduction_factor']!r}"
        )
    if kind == "adaptive_asha":
        if pruner["mode"] not in ("aggressive", "standard", "conservative"):
            raise ValueError(
                f"{where}.mode: expected one of aggressive, standard, conservative, "
                f"got {pruner['mode']!r}"
            )
        rungs = pruner["bracket_rungs"]
        if not isinstance(rungs, list) or not all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in rungs
        ):
            raise ValueError(
                f"{where}.bracket_rungs: expected a list of positive ints, got {rungs!r}"
            )
    return pruner


def read_settings(config: Mapping[str, Any]) -> Settings:
    """Check the ``searcher`` section of a whole experiment config.

    Raises:
        ValueError: a field is missing, unknown or of the wrong kind; the message starts with its
            path (``searcher.sampler: ...``).
    """
    section = config.get("searcher")
    if not isinstance(section, Mapping):
        raise ValueError("searcher: the experiment config has no searcher section")
    _unknown(section, _TOP_FIELDS, "searcher", "the optuna searcher")
    metric = section.get("metric")
    if not isinstance(metric, str) or not metric:
        raise ValueError(f"searcher.metric: expected a validation metric name, got {metric!r}")
    smaller_is_better = section.get("smaller_is_better", True)
    if smaller_is_better is None:
        smaller_is_better = True
    if not isinstance(smaller_is_better, bool):
        raise ValueError(f"searcher.smaller_is_better: expected a bool, got {smaller_is_better!r}")
    sampler = section.get("sampler") or "tpe"
    if sampler not in SAMPLERS:
        raise ValueError(
            f"searcher.sampler: expected one of {', '.join(SAMPLERS)}, got {sampler!r}"
        )
    startup = section.get("n_startup_trials")
    n_startup_trials = (
        None if startup is None else _int(section, "n_startup_trials", 0, 0, "searcher")
    )
    seed = section.get("seed")
    if seed is None:
        seed = (config.get("reproducibility") or {}).get("experiment_seed") or 0
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(
                f"reproducibility.experiment_seed: expected a non-negative integer, got {seed!r}"
            )
    else:
        seed = _int(section, "seed", None, 0, "searcher")
    has_length = any(section.get(k) is not None for k in ("max_time", "max_length"))
    time_metric: str | None = None
    max_time: int | None = None
    if has_length:
        time_metric, max_time = _length(section)
    elif section.get("time_metric") is not None:
        raise ValueError("searcher.max_time: required with searcher.time_metric")
    return Settings(
        metric=metric,
        smaller_is_better=smaller_is_better,
        sampler=str(sampler),
        n_startup_trials=n_startup_trials,
        seed=int(seed) & 0xFFFFFFFF,
        max_trials=_int(section, "max_trials", None, 1, "searcher"),
        max_concurrent_trials=_int(
            section, "max_concurrent_trials", DEFAULT_MAX_CONCURRENT_TRIALS, 0, "searcher"
        ),
        time_metric=time_metric,
        max_time=max_time,
        pruner=_pruner(section.get("pruner"), has_length),
    )


def read_number(metrics: Mapping[str, Any], name: str, role: str) -> float:
    """``metrics[name]`` as a float; ValueError naming the searcher metric when missing or NaN."""
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
