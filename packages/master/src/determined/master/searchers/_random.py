"""``single`` and ``random`` search: independent random samples, a fixed number at a time."""

from __future__ import annotations

from collections.abc import Mapping, Set
from typing import Any

from determined.searcher import Action, ExitedReason, SearchContext, SearchMethod


class RandomSearch(SearchMethod):
    """Random search: ``max_trials`` random samples, at most ``max_concurrent_trials`` at a time.

    Each exiting trial is replaced until ``max_trials`` have been created; a trial whose
    hyperparameters are invalid does not count towards ``max_trials`` (random only, not single).

    Args:
        max_trials: how many trials to run in all.
        max_concurrent_trials: how many run at once; 0 means all of them.
        search_method_type: ``"random"``, or ``"single"`` for the one-trial searcher.
    """

    def __init__(
        self, max_trials: int, max_concurrent_trials: int, search_method_type: str = "random"
    ) -> None:
        self.max_trials = max_trials
        self.max_concurrent_trials = max_concurrent_trials
        self.search_method_type = search_method_type
        self.created_trials = 0
        self.pending_trials = 0

    def initial_trials(self, ctx: SearchContext) -> list[Action]:
        count = self.max_trials
        if self.max_concurrent_trials > 0:
            count = min(self.max_trials, self.max_concurrent_trials)
        actions: list[Action] = []
        for _ in range(count):
            actions.append(ctx.create())
            self.created_trials += 1
            self.pending_trials += 1
        return actions

    def trial_exited_early(
        self, ctx: SearchContext, request_id: str, reason: ExitedReason
    ) -> list[Action]:
        self.pending_trials -= 1
        if self.search_method_type == "random" and reason in (
            ExitedReason.INVALID_HP,
            ExitedReason.INIT_INVALID_HP,
        ):
            self.created_trials -= 1
        return []

    def trial_exited(self, ctx: SearchContext, request_id: str) -> list[Action]:
        self.pending_trials -= 1
        if self.created_trials < self.max_trials:
            self.created_trials += 1
            self.pending_trials += 1
            return [ctx.create()]
        return []

    def progress(self, trial_progress: Mapping[str, float], trials_closed: Set[str]) -> float:
        return mean_trial_progress(trial_progress, trials_closed)

    def state_dict(self) -> dict[str, Any]:
        return {
            "created_trials": self.created_trials,
            "pending_trials": self.pending_trials,
            "search_method_type": self.search_method_type,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.created_trials = int(state["created_trials"])
        self.pending_trials = int(state["pending_trials"])
        self.search_method_type = str(state.get("search_method_type", self.search_method_type))


def mean_trial_progress(trial_progress: Mapping[str, float], trials_closed: Set[str]) -> float:
    """Mean over known trials of 1.0 for exited trials and the reported progress otherwise."""
    if not trial_progress:
        return 0.0
    total = 0.0
    for request_id, value in trial_progress.items():
        total += 1.0 if request_id in trials_closed else value
    return total / len(trial_progress)
