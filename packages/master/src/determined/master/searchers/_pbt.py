"""``pbt``: population-based training (Jaderberg et al., 2017), as Determined's PBT searcher had it.

A population of ``population_size`` trials trains in rounds of ``length_per_round``. Once every
member has reported its searcher metric at the end of a round, the members are ranked: the worst
``truncate_fraction`` are stopped and replaced by copies of the best ``truncate_fraction``, each
with explored hyperparameters (resampled with ``resample_probability``, otherwise multiplied by
``1 ± perturb_factor`` and clipped to their bounds) and warm-started from its parent's latest
checkpoint (``Create.parent_request_id``). Everyone else keeps training into the next round.
After ``num_rounds`` rounds every member is stopped.

Lengths are counted per trial: a copy starts at 0 in the time metric, so its round ends are
``length_per_round``, ``2 * length_per_round``, ... of its own training. A trial may report a
later round before the current one is decided (it keeps training meanwhile); that report waits.
A trial that exits early counts as worse than any real metric from then on (upstream did the same),
so it is replaced at the next round.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Set
from typing import Any

from determined.master.searchers._asha import EXITED_METRIC_VALUE, _decode, _encode
from determined.master.searchers._config import get_int, read_number
from determined.searcher import (
    Action,
    Create,
    ExitedReason,
    RandomState,
    SearchContext,
    SearchMethod,
    Stop,
    sample_one,
)

_LENGTH_UNITS = ("batches", "records", "epochs")


def _fraction(section: Mapping[str, Any], group: str, key: str, maximum: float = 1.0) -> float:
    """``section[group][key]`` as a number in ``[0, maximum]``; ValueError naming the field."""
    value = (section.get(group) or {}).get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= maximum:
        raise ValueError(
            f"searcher.{group}.{key}: expected a number in [0, {maximum:g}], got {value!r}"
        )
    return float(value)


def round_length(section: Mapping[str, Any]) -> tuple[str, int]:
    """``(time_metric, length)`` of one round from ``length_per_round``.

    ``{"batches": 25}`` (or records/epochs), or a bare integer counted in ``time_metric``
    (default ``batches``).
    """
    value = section.get("length_per_round")
    if isinstance(value, Mapping):
        if len(value) != 1 or next(iter(value)) not in _LENGTH_UNITS:
            raise ValueError(
                "searcher.length_per_round: expected one unit like {'batches': 25}, "
                f"got {value!r}"
            )
        ((unit, units),) = value.items()
    else:
        unit, units = section.get("time_metric") or "batches", value
    if isinstance(units, float) and units.is_integer():
        units = int(units)
    if isinstance(units, bool) or not isinstance(units, int) or units < 1:
        raise ValueError(
            f"searcher.length_per_round: expected a positive length like {{'batches': 25}}, "
            f"got {value!r}"
        )
    return str(unit), units


@dataclasses.dataclass(frozen=True)
class PBTConfig:
    """The ``pbt`` searcher section, validated (see :meth:`from_section`)."""

    metric: str
    smaller_is_better: bool
    population_size: int
    num_rounds: int
    time_metric: str
    length_per_round: int
    truncate_fraction: float
    resample_probability: float
    perturb_factor: float

    @property
    def num_truncate(self) -> int:
        """How many members are replaced each round: ``int(truncate_fraction * population)``."""
        return int(self.truncate_fraction * self.population_size)

    @classmethod
    def from_section(cls, section: Mapping[str, Any]) -> PBTConfig:
        """Read a ``searcher`` section; ValueError naming the field for anything invalid."""
        metric = section.get("metric")
        if not isinstance(metric, str) or not metric:
            raise ValueError(f"searcher.metric: expected a validation metric name, got {metric!r}")
        smaller_is_better = section.get("smaller_is_better", True)
        if smaller_is_better is None:
            smaller_is_better = True
        if not isinstance(smaller_is_better, bool):
            raise ValueError(
                f"searcher.smaller_is_better: expected a bool, got {smaller_is_better!r}"
            )
        for key in ("replace_function", "explore_function"):
            if not isinstance(section.get(key), Mapping):
                raise ValueError(f"searcher.{key}: required for searcher 'pbt' (a mapping)")
        time_metric, per_round = round_length(section)
        return cls(
            metric=metric,
            smaller_is_better=smaller_is_better,
            population_size=get_int(section, "population_size", None, 1),
            num_rounds=get_int(section, "num_rounds", None, 1),
            time_metric=time_metric,
            length_per_round=per_round,
            # Above one half the best and the worst would overlap (a member both copied and
            # stopped); upstream accepted it and did both.
            truncate_fraction=_fraction(section, "replace_function", "truncate_fraction", 0.5),
            resample_probability=_fraction(section, "explore_function", "resample_probability"),
            perturb_factor=_fraction(section, "explore_function", "perturb_factor"),
        )


def _clip(value: float, low: float, high: float) -> float:
    return min(max(value, low), high)


def explore(
    spec: Mapping[str, Any],
    old: Mapping[str, Any],
    rng: RandomState,
    resample_probability: float,
    perturb_factor: float,
    path: str = "",
) -> dict[str, Any]:
    """Hyperparameters "near" ``old``: each one is resampled with ``resample_probability``, else
    multiplied by ``1 - perturb_factor`` or ``1 + perturb_factor`` (even odds) and clipped to its
    bounds (int: rounded down when decreasing, up when increasing; log: within
    ``base**minval .. base**maxval``). Categorical and constant values change only when resampled.
    Nested sections are explored name by name; names are visited in sorted order.
    """
    out: dict[str, Any] = {}
    for name in sorted(spec):
        hp, where = spec[name], f"{path}.{name}" if path else name
        if isinstance(hp, Mapping) and "type" not in hp:
            inner = old.get(name)
            if not isinstance(inner, Mapping):
                inner = {}
            out[name] = explore(hp, inner, rng, resample_probability, perturb_factor, where)
            continue
        if name not in old or rng.random_sample() < resample_probability:
            out[name] = sample_one(hp, rng, where)
            continue
        value = old[name]
        kind = hp.get("type") if isinstance(hp, Mapping) else "const"
        if kind not in ("int", "double", "log"):
            out[name] = value
            continue
        decrease = rng.random_sample() < 0.5
        factor = 1.0 - perturb_factor if decrease else 1.0 + perturb_factor
        if kind == "int":
            scaled = float(value) * factor
            moved = math.floor(scaled) if decrease else math.ceil(scaled)
            out[name] = int(_clip(moved, int(hp["minval"]), int(hp["maxval"])))
        elif kind == "double":
            # minval inclusive, maxval exclusive for sampling; the clip allows the bound itself.
            out[name] = _clip(float(value) * factor, float(hp["minval"]), float(hp["maxval"]))
        else:
            base = float(hp["base"])
            low, high = base ** float(hp["minval"]), base ** float(hp["maxval"])
            out[name] = _clip(float(value) * factor, low, high)
    return out


class PBTSearch(SearchMethod):
    """Population-based training (upstream's ``pbtSearch``) on det's event protocol.

    Trials created: ``population_size + num_truncate * (num_rounds - 1)``.

    Args:
        config: the validated ``pbt`` section.
    """

    def __init__(self, config: PBTConfig) -> None:
        self.config = config
        self.round = 0
        """The round being played (every round before it is decided)."""
        self.members: list[str] = []
        """The population playing :attr:`round`, in creation order."""
        self.start_round: dict[str, int] = {}
        self.rounds_reported: dict[str, int] = {}
        self.reports: dict[str, dict[int, float]] = {}
        """Per trial, its (sign-adjusted) metric at the end of each round it reported."""
        self.hparams: dict[str, dict[str, Any]] = {}
        self.parents: dict[str, str] = {}
        self.exited: dict[str, bool] = {}

    # ------------------------------------------------------------------------------ events

    def initial_trials(self, ctx: SearchContext) -> list[Action]:
        return [self._create(ctx, ctx.create(), None) for _ in range(self.config.population_size)]

    def _create(self, ctx: SearchContext, create: Create, parent: str | None) -> Create:
        if parent is not None:
            # The parent's state at the end of the round just decided (it may have trained on):
            # steps_completed counts batches, so the bound is exact only for batch lengths.
            steps = None
            if self.config.time_metric == "batches":
                played = self.round - self.start_round[parent]
                steps = played * self.config.length_per_round
            create = dataclasses.replace(create, parent_request_id=parent, parent_steps=steps)
            self.parents[create.request_id] = parent
        self.members.append(create.request_id)
        self.start_round[create.request_id] = self.round
        self.rounds_reported[create.request_id] = 0
        self.reports[create.request_id] = {}
        self.hparams[create.request_id] = create.hparams
        return create

    def validation_completed(
        self, ctx: SearchContext, request_id: str, metrics: Mapping[str, Any]
    ) -> list[Action]:
        if request_id not in self.reports or request_id in self.exited:
            return []
        cfg = self.config
        value = read_number(metrics, cfg.metric, "metric")
        if not cfg.smaller_is_better:
            value = -value
        time_value = read_number(metrics, cfg.time_metric, "time_metric")
        crossed = int(time_value // cfg.length_per_round) if time_value >= 0 else 0
        last = cfg.num_rounds - self.start_round[request_id]
        while self.rounds_reported[request_id] < min(crossed, last):
            own_round = self.start_round[request_id] + self.rounds_reported[request_id]
            self.reports[request_id][own_round] = value
            self.rounds_reported[request_id] += 1
        return self._decide(ctx)

    def trial_exited_early(
        self, ctx: SearchContext, request_id: str, reason: ExitedReason
    ) -> list[Action]:
        self.exited[request_id] = True
        return self._decide(ctx)

    def trial_exited(self, ctx: SearchContext, request_id: str) -> list[Action]:
        self.exited[request_id] = True
        return self._decide(ctx)

    # ------------------------------------------------------------------------------ rounds

    def _metric(self, request_id: str, round_index: int) -> float | None:
        value = self.reports.get(request_id, {}).get(round_index)
        if value is not None:
            return value
        return EXITED_METRIC_VALUE if request_id in self.exited else None

    def _decide(self, ctx: SearchContext) -> list[Action]:
        """Decide every round whose results are all in (later ones may be complete already)."""
        actions: list[Action] = []
        cfg = self.config
        while self.round < cfg.num_rounds:
            metrics = {rid: self._metric(rid, self.round) for rid in self.members}
            if any(value is None for value in metrics.values()):
                break
            # Best first; ties keep creation order (upstream broke them by request order too).
            order = {rid: i for i, rid in enumerate(self.members)}
            ranked = sorted(self.members, key=lambda rid: (metrics[rid], order[rid]))
            self.round += 1
            if self.round >= cfg.num_rounds:
                actions.extend(Stop(rid) for rid in ranked if rid not in self.exited)
                self.members = []
                break
            cut = cfg.num_truncate
            worst, best = ranked[len(ranked) - cut :], ranked[:cut]
            actions.extend(Stop(rid) for rid in worst if rid not in self.exited)
            self.members = [rid for rid in self.members if rid not in worst]
            for parent in best:
                hparams = explore(
                    ctx.hyperparameters,
                    self.hparams[parent],
                    ctx.rng,
                    cfg.resample_probability,
                    cfg.perturb_factor,
                )
                actions.append(self._create(ctx, ctx.create(hparams), parent))
        return actions

    # ------------------------------------------------------------------------------ queries

    def rung_lengths(self, request_id: str) -> list[int] | None:
        """The trial's remaining round ends, in its own time-metric units."""
        start = self.start_round.get(request_id)
        if start is None:
            return None
        done = self.rounds_reported[request_id]
        per_round = self.config.length_per_round
        return [per_round * k for k in range(done + 1, self.config.num_rounds - start + 1)]

    def progress(self, trial_progress: Mapping[str, float], trials_closed: Set[str]) -> float:
        """Decided rounds plus the share of the current round's reports that are in."""
        cfg = self.config
        if self.round >= cfg.num_rounds or not self.members:
            return 1.0 if self.round >= cfg.num_rounds else 0.0
        ready = sum(1 for rid in self.members if self._metric(rid, self.round) is not None)
        return (self.round + ready / len(self.members)) / cfg.num_rounds

    def parent_of(self, request_id: str) -> str | None:
        """The request id of the trial ``request_id`` was copied from (None: first population)."""
        return self.parents.get(request_id)

    # ------------------------------------------------------------------------------ state

    def state_dict(self) -> dict[str, Any]:
        return {
            "round": self.round,
            "members": list(self.members),
            "start_round": dict(self.start_round),
            "rounds_reported": dict(self.rounds_reported),
            "reports": {
                rid: [[k, _encode(v)] for k, v in sorted(by_round.items())]
                for rid, by_round in self.reports.items()
            },
            "hparams": dict(self.hparams),
            "parents": dict(self.parents),
            "exited": dict(self.exited),
            "search_method_type": "pbt",
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.round = int(state["round"])
        self.members = [str(rid) for rid in state.get("members") or []]
        self.start_round = {str(k): int(v) for k, v in (state.get("start_round") or {}).items()}
        self.rounds_reported = {
            str(k): int(v) for k, v in (state.get("rounds_reported") or {}).items()
        }
        self.reports = {
            str(rid): {int(k): _decode(v) for k, v in pairs}
            for rid, pairs in (state.get("reports") or {}).items()
        }
        self.hparams = {str(k): dict(v) for k, v in (state.get("hparams") or {}).items()}
        self.parents = {str(k): str(v) for k, v in (state.get("parents") or {}).items()}
        self.exited = {str(k): bool(v) for k, v in (state.get("exited") or {}).items()}
