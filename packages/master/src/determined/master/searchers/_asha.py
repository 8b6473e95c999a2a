"""``async_halving``: stopping-based asynchronous successive halving (ASHA).

Every trial trains towards the full length; at each rung (a fraction ``1/divisor**k`` of it) its
searcher metric is ranked against every trial that reached that rung before it, and only the top
``1/divisor`` (at least the best one) go on. A stopped trial is replaced by a fresh random one until
``max_trials`` trials have been created.
"""

from __future__ import annotations

import bisect
import math
import sys
from collections.abc import Mapping, Set
from typing import Any

from determined.master.searchers._config import read_number
from determined.searcher import Action, ExitedReason, SearchContext, SearchMethod, Stop

EXITED_METRIC_VALUE = sys.float_info.max
"""The value recorded for a trial that errored or was canceled: worse than any real metric."""


def rung_units(num_rungs: int, divisor: float, max_time: int) -> list[int]:
    """The time-metric length of each rung: ``max(floor(max_time / divisor**(R-1-r)), 1)``."""
    return [
        max(int(float(max_time) / math.pow(divisor, float(num_rungs - r - 1))), 1)
        for r in range(num_rungs)
    ]


def _encode(value: float) -> float | str:
    # Keep the state strict JSON: infinities become strings, as upstream's ExtendedFloat64.
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return value


def _decode(value: float | str) -> float:
    return float(value)


class Rung:
    """One rung: the length needed to reach it and the metrics recorded there, best first.

    ``metrics`` is read-only outside this class: the sorted values are kept beside it so an
    insert costs a binary search, not a pass over every trial that reached the rung.
    """

    def __init__(self, units_needed: int) -> None:
        self.units_needed = units_needed
        self.metrics: list[tuple[str, float]] = []
        self._values: list[float] = []

    def insert(self, request_id: str, metric: float) -> int:
        """Record ``metric`` before any equal value; returns its position (0 = best)."""
        index = bisect.bisect_left(self._values, metric)
        self._values.insert(index, metric)
        self.metrics.insert(index, (request_id, metric))
        return index

    def remove(self, request_id: str) -> None:
        """Forget the entry of ``request_id`` (if any)."""
        for index, (rid, _) in enumerate(self.metrics):
            if rid == request_id:
                del self.metrics[index]
                del self._values[index]
                return


class AsyncHalvingSearch(SearchMethod):
    """ASHA with early stopping (upstream's ``asyncHalvingStoppingSearch``).

    Args:
        metric: the validation metric to rank by.
        smaller_is_better: whether smaller metric values are better.
        time_metric: the metric that counts training progress (``batches``, ``epochs``, ...).
        max_time: the full training length in ``time_metric`` units.
        num_rungs: how many rungs (the last one is ``max_time``).
        max_trials: how many trials to create in all.
        divisor: the reduction factor between rungs.
        max_concurrent_trials: how many run at once; 0 picks ``divisor**(num_rungs-1)``.
    """

    def __init__(
        self,
        metric: str,
        smaller_is_better: bool,
        time_metric: str,
        max_time: int,
        num_rungs: int,
        max_trials: int,
        divisor: float,
        max_concurrent_trials: int,
    ) -> None:
        self.metric = metric
        self.smaller_is_better = smaller_is_better
        self.time_metric = time_metric
        self.max_time = max_time
        self.num_rungs = num_rungs
        self.max_trials = max_trials
        self.divisor = divisor
        self.max_concurrent_trials = max_concurrent_trials
        self.rungs = [Rung(units) for units in rung_units(num_rungs, divisor, max_time)]
        self.trial_rungs: dict[str, int] = {}
        self.early_exit_trials: dict[str, bool] = {}
        self.trials_completed = 0
        self.invalid_trials = 0

    def initial_trials(self, ctx: SearchContext) -> list[Action]:
        if self.max_concurrent_trials > 0:
            count = min(self.max_concurrent_trials, self.max_trials)
        else:
            count = int(math.pow(self.divisor, float(self.num_rungs - 1)))
            count = max(1, min(count, self.max_trials))
        return [ctx.create() for _ in range(count)]

    def trial_created(self, ctx: SearchContext, request_id: str) -> list[Action]:
        self.trial_rungs[request_id] = 0
        return []

    def trial_exited(self, ctx: SearchContext, request_id: str) -> list[Action]:
        self.trials_completed += 1
        return []

    def validation_completed(
        self, ctx: SearchContext, request_id: str, metrics: Mapping[str, Any]
    ) -> list[Action]:
        value = read_number(metrics, self.metric, "metric")
        if not self.smaller_is_better:
            value = -value
        time_value = read_number(metrics, self.time_metric, "time_metric")
        if time_value < 0 or math.isinf(time_value):
            raise ValueError(
                f"validation metrics: the searcher time_metric {self.time_metric!r} must be a "
                f"finite number >= 0, got {time_value!r}"
            )
        actions = self._judge(request_id, int(time_value), value)
        if actions and len(self.trial_rungs) - self.invalid_trials < self.max_trials:
            actions.append(ctx.create())
        return actions

    def _judge(self, request_id: str, time_value: int, metric: float) -> list[Action]:
        """Record the report in every rung it reaches; Stop the trial when it should not go on."""
        for index in range(self.trial_rungs.get(request_id, 0), self.num_rungs):
            rung = self.rungs[index]
            self.trial_rungs[request_id] = index
            if time_value < rung.units_needed:
                return []
            position = rung.insert(request_id, metric)
            if index == self.num_rungs - 1:
                return [Stop(request_id)]
            keep = max(int(float(len(rung.metrics)) / self.divisor), 1)
            if position >= keep:
                return [Stop(request_id)]
        return []

    def trial_exited_early(
        self, ctx: SearchContext, request_id: str, reason: ExitedReason
    ) -> list[Action]:
        self.early_exit_trials[request_id] = True
        if reason in (ExitedReason.INVALID_HP, ExitedReason.INIT_INVALID_HP):
            self.invalid_trials += 1
            for rung in self.rungs[: self.trial_rungs.get(request_id, 0) + 1]:
                rung.remove(request_id)
            return [Stop(request_id), ctx.create()]
        self.rungs[self.trial_rungs.get(request_id, 0)].insert(request_id, EXITED_METRIC_VALUE)
        if len(self.trial_rungs) - self.invalid_trials < self.max_trials:
            return [ctx.create()]
        return []

    def progress(self, trial_progress: Mapping[str, float], trials_closed: Set[str]) -> float:
        in_first_rung = len(self.rungs[0].metrics)
        # 20% headroom over max_trials while trials are still being created.
        value = in_first_rung / (1.2 * self.max_trials)
        if in_first_rung == self.max_trials:
            valid = float(self.trials_completed) - float(self.invalid_trials)
            value = max(valid / self.max_trials, value)
        return value

    def rung_lengths(self, request_id: str) -> list[int] | None:
        start = self.trial_rungs.get(request_id, 0)
        return [rung.units_needed for rung in self.rungs[start:]]

    def state_dict(self) -> dict[str, Any]:
        return {
            "rungs": [
                {
                    "units_needed": rung.units_needed,
                    "metrics": [
                        {"request_id": rid, "metric": _encode(value)} for rid, value in rung.metrics
                    ],
                }
                for rung in self.rungs
            ],
            "trial_rungs": dict(self.trial_rungs),
            "early_exit_trials": dict(self.early_exit_trials),
            "trials_completed": self.trials_completed,
            "invalid_trials": self.invalid_trials,
            "search_method_type": "asha",
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        rungs = state["rungs"]
        if len(rungs) != self.num_rungs:
            raise ValueError(
                f"search_method_state.rungs: expected {self.num_rungs} rungs, got {len(rungs)}"
            )
        self.rungs = []
        for saved in rungs:
            entries = [
                (str(entry["request_id"]), _decode(entry["metric"]))
                for entry in saved.get("metrics") or []
            ]
            rung = Rung(int(saved["units_needed"]))
            # Saved best first; appending keeps that order even for ties (no re-sorting).
            rung.metrics = entries
            rung._values = [value for _, value in entries]
            self.rungs.append(rung)
        self.trial_rungs = {str(k): int(v) for k, v in (state.get("trial_rungs") or {}).items()}
        self.early_exit_trials = {
            str(k): bool(v) for k, v in (state.get("early_exit_trials") or {}).items()
        }
        self.trials_completed = int(state.get("trials_completed", 0))
        self.invalid_trials = int(state.get("invalid_trials", 0))
