"""``adaptive_asha``: a tournament of ASHA brackets with different numbers of rungs.

Brackets with many rungs stop trials early and explore many configurations; brackets with few rungs
train fewer configurations for longer. Each bracket is an independent :class:`AsyncHalvingSearch`;
this method routes every event to the bracket that created the trial.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Set
from dataclasses import dataclass
from typing import Any

from determined.master.searchers._asha import AsyncHalvingSearch
from determined.searcher import Action, Create, ExitedReason, SearchContext, SearchMethod

MODES = ("aggressive", "standard", "conservative")


@dataclass(frozen=True)
class Bracket:
    """One ASHA bracket: its number of rungs, its share of trials and of concurrency."""

    num_rungs: int
    max_trials: int
    max_concurrent_trials: int


def max_rungs_for(max_rungs: int, max_time: int, divisor: float, max_trials: int) -> int:
    """Cap ``max_rungs`` so the first rung has at least one unit and one trial can reach the top."""
    by_length = int(math.log(float(max_time)) / math.log(divisor)) + 1
    by_trials = int(math.log(float(max_trials)) / math.log(divisor)) + 1
    return min(max_rungs, by_length, by_trials)


def bracket_rungs_for_mode(mode: str, max_rungs: int) -> list[int]:
    """The rung counts of the brackets: aggressive ``[R]``, standard the upper half, conservative all."""
    if mode == "aggressive":
        return [max_rungs]
    if mode == "standard":
        return list(range((max_rungs - 1) // 2 + 1, max_rungs + 1))
    if mode == "conservative":
        return list(range(1, max_rungs + 1))
    raise ValueError(f"searcher.mode: expected one of {', '.join(MODES)}, got {mode!r}")


def bracket_max_trials(max_trials: int, divisor: float, bracket_rungs: list[int]) -> list[int]:
    """Split ``max_trials`` by weight ``divisor**(n-1)/n``; the leftover goes to the first bracket."""
    weights = [math.pow(divisor, float(n - 1)) / float(n) for n in bracket_rungs]
    total = 0.0
    for weight in weights:
        total += weight
    trials = [max(int(weight / total * float(max_trials)), 1) for weight in weights]
    trials[0] += max(max_trials - sum(trials), 0)
    return trials


def bracket_max_concurrent_trials(
    max_concurrent_trials: int, divisor: float, max_trials: list[int]
) -> list[int]:
    """Split the concurrency evenly (extra to the first brackets); 0 means "enough for each"."""
    count = len(max_trials)
    if max_concurrent_trials == 0:
        return [max(max_trials[-1], int(divisor))] * count
    total = max(max_concurrent_trials, count)
    shares = [total // count] * count
    for i in range(total % count):
        shares[i] += 1
    return shares


def make_brackets(
    *,
    max_trials: int,
    max_time: int,
    divisor: float,
    mode: str,
    max_rungs: int,
    bracket_rungs: list[int] | None,
    max_concurrent_trials: int,
) -> list[Bracket]:
    """The brackets of an adaptive ASHA search, most aggressive (most rungs) first."""
    rungs = list(bracket_rungs or [])
    if not rungs:
        rungs = bracket_rungs_for_mode(
            mode, max_rungs_for(max_rungs, max_time, divisor, max_trials)
        )
    rungs.sort(reverse=True)
    trials = bracket_max_trials(max_trials, divisor, rungs)
    concurrency = bracket_max_concurrent_trials(max_concurrent_trials, divisor, trials)
    return [
        Bracket(num_rungs=n, max_trials=t, max_concurrent_trials=c)
        for n, t, c in zip(rungs, trials, concurrency, strict=True)
    ]


class AdaptiveASHASearch(SearchMethod):
    """A tournament over ASHA brackets (upstream's ``tournamentSearch`` of ``adaptive_asha``).

    Args:
        brackets: the brackets, as from :func:`make_brackets`.
        metric, smaller_is_better, time_metric, max_time, divisor: as for
            :class:`~determined.master.searchers.AsyncHalvingSearch`.
    """

    def __init__(
        self,
        brackets: list[Bracket],
        *,
        metric: str,
        smaller_is_better: bool,
        time_metric: str,
        max_time: int,
        divisor: float,
    ) -> None:
        self.brackets = brackets
        self.sub_searches = [
            AsyncHalvingSearch(
                metric=metric,
                smaller_is_better=smaller_is_better,
                time_metric=time_metric,
                max_time=max_time,
                num_rungs=bracket.num_rungs,
                max_trials=bracket.max_trials,
                divisor=divisor,
                max_concurrent_trials=bracket.max_concurrent_trials,
            )
            for bracket in brackets
        ]
        self.trial_table: dict[str, int] = {}

    def _mark(self, index: int, actions: list[Action]) -> list[Action]:
        for action in actions:
            if isinstance(action, Create):
                self.trial_table[action.request_id] = index
        return actions

    def _route(self, request_id: str) -> tuple[int, AsyncHalvingSearch]:
        index = self.trial_table.get(request_id, 0)
        return index, self.sub_searches[index]

    def initial_trials(self, ctx: SearchContext) -> list[Action]:
        actions: list[Action] = []
        for index, sub_search in enumerate(self.sub_searches):
            actions.extend(self._mark(index, sub_search.initial_trials(ctx)))
        return actions

    def trial_created(self, ctx: SearchContext, request_id: str) -> list[Action]:
        index, sub_search = self._route(request_id)
        return self._mark(index, sub_search.trial_created(ctx, request_id))

    def validation_completed(
        self, ctx: SearchContext, request_id: str, metrics: Mapping[str, Any]
    ) -> list[Action]:
        index, sub_search = self._route(request_id)
        return self._mark(index, sub_search.validation_completed(ctx, request_id, metrics))

    def trial_exited(self, ctx: SearchContext, request_id: str) -> list[Action]:
        index, sub_search = self._route(request_id)
        return self._mark(index, sub_search.trial_exited(ctx, request_id))

    def trial_exited_early(
        self, ctx: SearchContext, request_id: str, reason: ExitedReason
    ) -> list[Action]:
        index, sub_search = self._route(request_id)
        return self._mark(index, sub_search.trial_exited_early(ctx, request_id, reason))

    def progress(self, trial_progress: Mapping[str, float], trials_closed: Set[str]) -> float:
        # One pass over the trials (the master asks after every batch of actions).
        progress: list[dict[str, float]] = [{} for _ in self.sub_searches]
        closed: list[set[str]] = [set() for _ in self.sub_searches]
        for request_id, value in trial_progress.items():
            progress[self.trial_table.get(request_id, 0)][request_id] = value
        for request_id in trials_closed:
            closed[self.trial_table.get(request_id, 0)].add(request_id)
        total = 0.0
        for index, sub_search in enumerate(self.sub_searches):
            total += sub_search.progress(progress[index], closed[index])
        return total / len(self.sub_searches)

    def rung_lengths(self, request_id: str) -> list[int] | None:
        return self._route(request_id)[1].rung_lengths(request_id)

    def state_dict(self) -> dict[str, Any]:
        return {
            "trial_table": dict(self.trial_table),
            "sub_search_states": [sub.state_dict() for sub in self.sub_searches],
            "search_method_type": "adaptive_asha",
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        sub_states = state["sub_search_states"]
        if len(sub_states) != len(self.sub_searches):
            raise ValueError(
                f"search_method_state.sub_search_states: expected {len(self.sub_searches)} "
                f"brackets, got {len(sub_states)}"
            )
        self.trial_table = {str(k): int(v) for k, v in (state.get("trial_table") or {}).items()}
        for sub_search, sub_state in zip(self.sub_searches, sub_states, strict=True):
            sub_search.load_state_dict(sub_state)
