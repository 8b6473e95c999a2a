"""``OptunaSearch``: Optuna's samplers propose, det's schedulers decide who trains how long.

The method is two parts. A scheduler, an ordinary det search method, decides when trials start and
stop: det-master's own ``async_halving``/``adaptive_asha`` arithmetic for ``pruner: asha`` and
``adaptive_asha``, or :class:`~determined.optuna._pruned.PrunerScheduler` for Optuna's pruners.
It creates trials through a context that leaves their hyperparameters blank. After each event the
Optuna study first learns the outcome of every trial the scheduler stopped (COMPLETE at the full
length, PRUNED before it, with every intermediate value, so TPE also learns from stopped trials),
and only then fills the blank creates by asking the sampler: a replacement trial is proposed
knowing why its predecessor was stopped.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Set
from typing import Any

from optuna.trial import TrialState

from determined.master import searchers as det_searchers
from determined.optuna._pruned import PrunerScheduler
from determined.optuna._settings import Settings, read_number, read_settings
from determined.optuna._space import SearchSpace
from determined.optuna._study import Study
from determined.searcher import (
    Action,
    Create,
    ExitedReason,
    SearchContext,
    SearchMethod,
    Stop,
)


class _BlankContext(SearchContext):
    """The scheduler's context: ``create()`` draws ids and seeds as usual but samples nothing."""

    def sample_hparams(self) -> dict[str, Any]:
        return {}


def _num_rungs(settings: Settings) -> int:
    """As adaptive ASHA caps its rungs: the first rung has a unit, one trial reaches the top."""
    divisor = float(settings.pruner["divisor"])
    by_length = int(math.log(float(settings.max_time or 1)) / math.log(divisor)) + 1
    by_trials = int(math.log(float(settings.max_trials)) / math.log(divisor)) + 1
    return min(int(settings.pruner["max_rungs"]), by_length, by_trials)


def _asha_scheduler(settings: Settings) -> SearchMethod:
    """det-master's ASHA method for ``pruner: asha`` / ``adaptive_asha``."""
    pruner = settings.pruner
    section: dict[str, Any] = {
        "metric": settings.metric,
        "smaller_is_better": settings.smaller_is_better,
        "time_metric": settings.time_metric,
        "max_time": settings.max_time,
        "max_trials": settings.max_trials,
        "max_concurrent_trials": settings.max_concurrent_trials,
        "divisor": pruner["divisor"],
    }
    if pruner["type"] == "asha":
        # As adaptive ASHA caps its rungs: the first rung has a unit, one trial reaches the top.
        divisor = float(pruner["divisor"])
        by_length = int(math.log(float(settings.max_time or 1)) / math.log(divisor)) + 1
        by_trials = int(math.log(float(settings.max_trials)) / math.log(divisor)) + 1
        section.update(
            name="async_halving", num_rungs=min(pruner["max_rungs"], by_length, by_trials)
        )
    else:
        section.update(
            name="adaptive_asha",
            mode=pruner["mode"],
            max_rungs=pruner["max_rungs"],
            bracket_rungs=pruner["bracket_rungs"],
        )
    method = det_searchers.build_search_method({"searcher": section})
    if method is None:  # pragma: no cover - det-master always knows both names
        raise ValueError(f"searcher.pruner.type: det-master has no {section['name']} searcher")
    return method


class OptunaSearch(SearchMethod):
    """The ``optuna`` searcher: an Optuna sampler's proposals under det's early stopping.

    Args:
        config: the whole experiment config (``searcher`` with ``name: optuna``,
            ``hyperparameters``, ``reproducibility.experiment_seed``).

    Raises:
        ValueError: a searcher field or a hyperparameter is invalid; the message names it.
    """

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.settings = read_settings(config)
        self.space = SearchSpace(config.get("hyperparameters") or {})
        self.study = Study(self.settings, self.space)
        self.scheduler: SearchMethod
        if self.settings.pruner_type in ("asha", "adaptive_asha"):
            self.scheduler = _asha_scheduler(self.settings)
        else:
            self.scheduler = PrunerScheduler(self.settings, self.study)
        self._reports: dict[str, int] = {}
        """Per trial, how many validations it reported (the step when there is no time metric)."""

    # ---------------------------------------------------------------------------------- events

    def _run(
        self, ctx: SearchContext, call: Callable[[SearchContext], list[Action]]
    ) -> list[Action]:
        actions = list(call(_BlankContext(ctx.rng, ctx.hyperparameters)))
        for action in actions:
            if isinstance(action, Stop):
                self._told(action.request_id)
        for action in actions:
            if isinstance(action, Create):
                self._propose(action)
        return actions

    def _propose(self, create: Create) -> None:
        number, hparams = self.study.ask()
        create.hparams.update(hparams)
        self.study.bind(create.request_id, number)

    def _told(self, request_id: str) -> None:
        """Tell the study how a trial the scheduler stopped ended."""
        latest = self.study.last(request_id) if request_id in self.study.numbers else None
        full = self.settings.max_time is None or (
            latest is not None and latest[0] >= self.settings.max_time
        )
        self.study.finish(request_id, TrialState.COMPLETE if full else TrialState.PRUNED)

    def initial_trials(self, ctx: SearchContext) -> list[Action]:
        return self._run(ctx, self.scheduler.initial_trials)

    def trial_created(self, ctx: SearchContext, request_id: str) -> list[Action]:
        return self._run(ctx, lambda inner: self.scheduler.trial_created(inner, request_id))

    def validation_completed(
        self, ctx: SearchContext, request_id: str, metrics: Mapping[str, Any]
    ) -> list[Action]:
        value = read_number(metrics, self.settings.metric, "metric")
        self._reports[request_id] = self._reports.get(request_id, 0) + 1
        if self.settings.time_metric is not None:
            time_value = read_number(metrics, self.settings.time_metric, "time_metric")
            if time_value < 0 or math.isinf(time_value):
                raise ValueError(
                    f"validation metrics: the searcher time_metric {self.settings.time_metric!r} "
                    f"must be a finite number >= 0, got {time_value!r}"
                )
            step = int(time_value)
        else:
            step = self._reports[request_id]
        if request_id in self.study.numbers:
            self.study.report(request_id, step, value)
        return self._run(
            ctx, lambda inner: self.scheduler.validation_completed(inner, request_id, metrics)
        )

    def trial_exited(self, ctx: SearchContext, request_id: str) -> list[Action]:
        if request_id in self.study.numbers:
            self._told(request_id)
        return self._run(ctx, lambda inner: self.scheduler.trial_exited(inner, request_id))

    def trial_exited_early(
        self, ctx: SearchContext, request_id: str, reason: ExitedReason
    ) -> list[Action]:
        if request_id in self.study.numbers:
            self.study.finish(request_id, TrialState.FAIL)
        return self._run(
            ctx, lambda inner: self.scheduler.trial_exited_early(inner, request_id, reason)
        )

    def progress(self, trial_progress: Mapping[str, float], trials_closed: Set[str]) -> float:
        return self.scheduler.progress(trial_progress, trials_closed)

    def rung_lengths(self, request_id: str) -> list[int] | None:
        return self.scheduler.rung_lengths(request_id)

    # ---------------------------------------------------------------------------------- state

    def state_dict(self) -> dict[str, Any]:
        return {
            "search_method_type": "optuna",
            "scheduler": self.scheduler.state_dict(),
            "study": self.study.state_dict(),
            "reports": dict(self._reports),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.scheduler.load_state_dict(state.get("scheduler") or {})
        self.study.load_state_dict(state.get("study") or {})
        self._reports = {str(k): int(v) for k, v in (state.get("reports") or {}).items()}


def build_search_method(config: Mapping[str, Any]) -> OptunaSearch | None:
    """The ``optuna`` searcher for a whole experiment config, or ``None`` for other names."""
    section = config.get("searcher")
    if not isinstance(section, Mapping) or section.get("name") != "optuna":
        return None
    return OptunaSearch(config)
