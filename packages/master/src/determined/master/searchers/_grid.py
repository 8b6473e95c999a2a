"""``grid`` search: every point of the grid, last point first."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Set
from typing import Any

from determined.master.searchers._random import mean_trial_progress
from determined.searcher import Action, SearchContext, SearchMethod, hparam_grid


class GridSearch(SearchMethod):
    """Grid search: one trial per grid point, at most ``max_concurrent_trials`` at a time.

    Points are taken from the end of the grid (the last point runs first, as upstream); each
    exiting trial starts the next remaining point. The remaining points are part of the state.

    Args:
        max_concurrent_trials: how many run at once; 0 means all of them.
    """

    def __init__(self, max_concurrent_trials: int) -> None:
        self.max_concurrent_trials = max_concurrent_trials
        self.pending_trials = 0
        self.remaining_trials: list[dict[str, Any]] = []

    def initial_trials(self, ctx: SearchContext) -> list[Action]:
        self.remaining_trials.extend(hparam_grid(ctx.hyperparameters))
        count = len(self.remaining_trials)
        if self.max_concurrent_trials > 0:
            count = min(count, self.max_concurrent_trials)
        actions: list[Action] = []
        for _ in range(count):
            actions.append(ctx.create(self.remaining_trials.pop()))
            self.pending_trials += 1
        return actions

    def trial_exited(self, ctx: SearchContext, request_id: str) -> list[Action]:
        self.pending_trials -= 1
        if self.remaining_trials:
            self.pending_trials += 1
            return [ctx.create(self.remaining_trials.pop())]
        return []

    def progress(self, trial_progress: Mapping[str, float], trials_closed: Set[str]) -> float:
        return mean_trial_progress(trial_progress, trials_closed)

    def state_dict(self) -> dict[str, Any]:
        return {
            "pending_trials": self.pending_trials,
            "remaining_trials": copy.deepcopy(self.remaining_trials),
            "search_method_type": "grid",
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.pending_trials = int(state["pending_trials"])
        self.remaining_trials = copy.deepcopy(list(state.get("remaining_trials") or []))
