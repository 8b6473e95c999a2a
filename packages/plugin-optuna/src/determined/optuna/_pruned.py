"""Trial scheduling under Optuna's own pruners (``hyperband``, ``median``) or no early stopping.

det's ASHA schedulers (``asha``, ``adaptive_asha``) come from det-master; this one keeps
``max_concurrent_trials`` trials running, asks the pruner at every length a trial reports, and
starts a new trial whenever one ends, until ``max_trials`` have been created.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Set
from typing import Any

from determined.optuna._settings import Settings
from determined.optuna._study import Study
from determined.searcher import Action, ExitedReason, SearchContext, SearchMethod, Stop


def check_lengths(settings: Settings) -> list[int] | None:
    """The lengths at which trials report to the pruner (the last one is ``max_time``)."""
    max_time = settings.max_time
    pruner = settings.pruner
    if max_time is None:
        return None
    lengths: set[int] = {max_time}
    if pruner["type"] == "hyperband":
        length = pruner["min_resource"]
        while length < max_time:
            lengths.add(int(length))
            length *= pruner["reduction_factor"]
    elif pruner["type"] == "median":
        count = pruner["num_checks"]
        lengths.update(max(math.ceil(max_time * k / count), 1) for k in range(1, count))
    return sorted(lengths)


class PrunerScheduler(SearchMethod):
    """Runs trials to ``max_time`` unless Optuna's pruner stops them (events from OptunaSearch).

    Args:
        settings: the checked searcher section.
        study: the study the pruner judges in (the caller reports every validation to it first).
    """

    def __init__(self, settings: Settings, study: Study) -> None:
        self.settings = settings
        self.study = study
        self.lengths = check_lengths(settings)
        self.created = 0
        self.invalid = 0
        self.ended: dict[str, bool] = {}
        """Trials whose slot was handed to a new trial (stopped, exited or failed)."""

    def _end(self, ctx: SearchContext, request_id: str) -> list[Action]:
        if request_id in self.ended:
            return []
        self.ended[request_id] = True
        if self.created - self.invalid < self.settings.max_trials:
            self.created += 1
            return [ctx.create()]
        return []

    def initial_trials(self, ctx: SearchContext) -> list[Action]:
        concurrency = self.settings.max_concurrent_trials or self.settings.max_trials
        count = min(concurrency, self.settings.max_trials)
        self.created = count
        return [ctx.create() for _ in range(count)]

    def validation_completed(
        self, ctx: SearchContext, request_id: str, metrics: Mapping[str, Any]
    ) -> list[Action]:
        if request_id in self.ended:
            return []
        latest = self.study.last(request_id)
        max_time = self.settings.max_time
        if max_time is not None and latest is not None and latest[0] >= max_time:
            return [Stop(request_id), *self._end(ctx, request_id)]
        if latest is not None and self.study.should_prune(request_id):
            return [Stop(request_id), *self._end(ctx, request_id)]
        return []

    def trial_exited(self, ctx: SearchContext, request_id: str) -> list[Action]:
        return self._end(ctx, request_id)

    def trial_exited_early(
        self, ctx: SearchContext, request_id: str, reason: ExitedReason
    ) -> list[Action]:
        if reason in (ExitedReason.INVALID_HP, ExitedReason.INIT_INVALID_HP):
            self.invalid += 1
        return self._end(ctx, request_id)

    def progress(self, trial_progress: Mapping[str, float], trials_closed: Set[str]) -> float:
        return min(len(trials_closed) / max(self.settings.max_trials + self.invalid, 1), 1.0)

    def rung_lengths(self, request_id: str) -> list[int] | None:
        return None if self.lengths is None else list(self.lengths)

    def state_dict(self) -> dict[str, Any]:
        return {"created": self.created, "invalid": self.invalid, "ended": dict(self.ended)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.created = int(state.get("created", 0))
        self.invalid = int(state.get("invalid", 0))
        self.ended = {str(k): True for k in state.get("ended") or {}}
