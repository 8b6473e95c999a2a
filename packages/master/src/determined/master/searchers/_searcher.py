"""The master's view of a search: a search method plus the bookkeeping every search shares."""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from typing import Any

from determined.core import plugins
from determined.master.searchers._config import get_length
from determined.searcher import (
    Action,
    Create,
    ExitedReason,
    RandomState,
    SearchContext,
    SearchMethod,
    Shutdown,
    Stop,
)


def _number(value: Any) -> float | None:
    """``value`` as a finite float, or None when it is not a real number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _training_length(section: Mapping[str, Any]) -> tuple[str | None, int | None]:
    """``(time_metric, full length)`` of a searcher section; ``None`` for what it does not set."""
    if section.get("name") == "pbt":
        from determined.master.searchers._pbt import round_length

        try:
            time_metric, per_round = round_length(section)
        except ValueError:
            return None, None
        rounds = section.get("num_rounds")
        return time_metric, per_round * rounds if isinstance(rounds, int) else None
    try:
        time_metric, max_time = get_length(section)
    except ValueError:
        name = section.get("time_metric")
        return (str(name) if name else None), None
    return time_metric, max_time


def _experiment_seed(config: Mapping[str, Any]) -> int:
    seed = (config.get("reproducibility") or {}).get("experiment_seed", 0)
    if seed is None:
        seed = 0
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(
            f"reproducibility.experiment_seed: expected a non-negative integer, got {seed!r}"
        )
    return seed & 0xFFFFFFFF


class Searcher:
    """Drives one experiment's search method and owns the state every search shares.

    The method is picked through the ``det_search_method`` hook from ``config["searcher"]["name"]``
    (or given explicitly) and its RNG is seeded with ``reproducibility.experiment_seed``. The wrapper
    counts requested trials, created/closed trials, exits, cancels and failures, and emits
    :class:`Shutdown` once every requested trial has exited: ``failure`` when all of them errored,
    ``cancel`` when all of them were canceled.

    Validations reach the method at most once per training length: a trial the method stopped
    reports nothing more (its Stop means "no more results needed"; upstream fed a stopped trial's
    late reports to ASHA again, which recorded it twice in a rung and created an extra trial), and a
    report whose ``time_metric`` value is not beyond the last one fed for that trial is dropped
    (a restarted trial re-reporting a length it already reported, or a validation arriving after
    the completed operation of the same length).

    It also answers the operations protocol of the Core API's searcher loop
    (:meth:`next_operation`, :meth:`operation_completed`): the lengths come from the method's
    :meth:`~determined.searcher.SearchMethod.rung_lengths` (ASHA rungs), else one operation of the
    full length (``max_time``, or the legacy ``max_length``).

    Args:
        config: the whole, validated experiment config.
        method: use this method instead of asking the plugins.
    """

    def __init__(self, config: Mapping[str, Any], method: SearchMethod | None = None) -> None:
        self.config = config
        if method is None:
            # The built-ins come by entry point too; registering them here keeps them available when
            # entry-point autoload is off (DET_DISABLE_PLUGIN_AUTOLOAD).
            from determined.master.searchers import _plugin

            plugins.register(_plugin, name="searchers")
            method = plugins.search_method(dict(config))
        self.method = method
        self.rng = RandomState(_experiment_seed(config))
        hyperparameters = config.get("hyperparameters") or {}
        if not isinstance(hyperparameters, Mapping):
            raise ValueError(f"hyperparameters: expected a mapping, got {hyperparameters!r}")
        self._ctx = SearchContext(self.rng, hyperparameters)
        self.trials_requested = 0
        self.trials_created: dict[str, bool] = {}
        self.trials_closed: dict[str, bool] = {}
        self.exits: dict[str, bool] = {}
        self.cancels: dict[str, bool] = {}
        self.failures: dict[str, bool] = {}
        self.trial_progress: dict[str, float] = {}
        self.stopped: dict[str, bool] = {}
        """Trials the method stopped: their later reports are not fed to it."""
        self.validated_time: dict[str, float] = {}
        """Per trial, the largest ``time_metric`` value fed to the method."""
        self.op_lengths: dict[str, int] = {}
        """Trials on the operations protocol, with the longest operation they completed (0: none)."""
        section = config.get("searcher") or {}
        if not isinstance(section, Mapping):
            raise ValueError(f"searcher: expected a mapping, got {section!r}")
        metric = section.get("metric")
        self.metric_name: str | None = metric if isinstance(metric, str) and metric else None
        self.time_metric, self.max_time = _training_length(section)

    def _record(self, actions: list[Action]) -> list[Action]:
        for action in actions:
            if isinstance(action, Create):
                self.trials_requested += 1
            elif isinstance(action, Stop):
                self.stopped[action.request_id] = True
        return actions

    def _shutdown_if_done(self, actions: list[Action], with_cancel: bool) -> list[Action]:
        if self.trials_requested == len(self.trials_closed):
            actions.append(
                Shutdown(
                    cancel=with_cancel and len(self.cancels) >= self.trials_requested,
                    failure=len(self.failures) >= self.trials_requested,
                )
            )
        return actions

    def initial_trials(self) -> list[Action]:
        """The first actions of the search; call once, right after construction."""
        return self._record(list(self.method.initial_trials(self._ctx)))

    def trial_created(self, request_id: str) -> list[Action]:
        """The master built the trial of a :class:`Create`."""
        self.trials_created[request_id] = True
        self.trial_progress[request_id] = 0.0
        return self._record(list(self.method.trial_created(self._ctx, request_id)))

    def is_trial_created(self, request_id: str) -> bool:
        """Whether :meth:`trial_created` was called for ``request_id``."""
        return request_id in self.trials_created

    def is_trial_closed(self, request_id: str) -> bool:
        """Whether :meth:`trial_exited` was called for ``request_id``."""
        return request_id in self.trials_closed

    def validation_completed(self, request_id: str, metrics: Mapping[str, Any]) -> list[Action]:
        """A trial reported validation metrics.

        Dropped (answering no actions) when the method stopped the trial or already judged it at
        this ``time_metric`` value or beyond. A trial on the operations protocol is judged by its
        completed operations: its validations reach the method only when they carry both the
        searcher metric and the time metric as numbers (so 0.37-style code that reports neither is
        not an error).

        Raises:
            ValueError: the method needs the searcher metric or time metric and it is missing or
                not a number (the experiment should then fail, as upstream).
        """
        if not isinstance(metrics, Mapping):
            raise ValueError(f"validation metrics: expected a mapping, got {metrics!r}")
        if request_id in self.stopped:
            return []
        time_value = _number(metrics.get(self.time_metric)) if self.time_metric else None
        if request_id in self.op_lengths and (
            time_value is None
            or self.metric_name is None
            or _number(metrics.get(self.metric_name)) is None
        ):
            return []
        return self._feed(request_id, metrics, time_value)

    def _feed(
        self, request_id: str, metrics: Mapping[str, Any], time_value: float | None
    ) -> list[Action]:
        if time_value is not None:
            seen = self.validated_time.get(request_id)
            if seen is not None and time_value <= seen:
                return []
            self.validated_time[request_id] = time_value
        return self._record(list(self.method.validation_completed(self._ctx, request_id, metrics)))

    def next_operation(self, request_id: str) -> int | None:
        """The length the trial should train to next (``op.length``), or None when it is done.

        Marks the trial as one on the operations protocol. A trial is done once the method stopped
        it, it exited, or it completed an operation of every length the method plans for it.

        Raises:
            ValueError: the search has no training length (no ``max_time``/``max_length``, and the
                method plans none), naming the field.
        """
        done = self.op_lengths.setdefault(request_id, 0)
        if request_id in self.stopped or request_id in self.trials_closed:
            return None
        lengths = self.method.rung_lengths(request_id)
        if lengths is None:
            if self.max_time is None:
                raise ValueError(
                    "searcher.max_length: the searcher loop needs a training length; set "
                    "searcher.max_time and searcher.time_metric (or the legacy max_length)"
                )
            lengths = [self.max_time]
        for length in lengths:
            if length > done:
                return int(length)
        return None

    def operation_completed(
        self, request_id: str, length: int, searcher_metric: float
    ) -> list[Action]:
        """The trial trained to ``length`` and reports ``searcher_metric`` (``op.report_completed``).

        Fed to the method as a validation ``{metric: searcher_metric, time_metric: length}``,
        unless the trial already reported a validation at this length or beyond (then the method
        has judged it already), or the method stopped it.
        """
        self.op_lengths[request_id] = max(self.op_lengths.get(request_id, 0), int(length))
        if request_id in self.stopped:
            return []
        metrics: dict[str, Any] = {}
        if self.metric_name is not None:
            metrics[self.metric_name] = searcher_metric
        if self.time_metric is not None:
            metrics[self.time_metric] = int(length)
        return self._feed(request_id, metrics, float(length))

    def trial_exited(self, request_id: str) -> list[Action]:
        """A trial's process is gone for good; may end the search with :class:`Shutdown`."""
        self.trials_closed[request_id] = True
        actions = self._record(list(self.method.trial_exited(self._ctx, request_id)))
        return self._shutdown_if_done(actions, with_cancel=True)

    def trial_exited_early(self, request_id: str, reason: ExitedReason) -> list[Action]:
        """A trial errored, was canceled or had invalid hyperparameters; a repeat is ignored."""
        reason = ExitedReason(reason)
        if request_id in self.exits:
            return []
        if reason in (ExitedReason.INVALID_HP, ExitedReason.INIT_INVALID_HP):
            self.trial_progress.pop(request_id, None)
        elif reason is ExitedReason.USER_CANCELED:
            self.cancels[request_id] = True
        elif reason is ExitedReason.ERRORED:
            self.failures[request_id] = True
        actions = list(self.method.trial_exited_early(self._ctx, request_id, reason))
        self.exits[request_id] = True
        self._record(actions)
        # Upstream checks completion here too (only failure is reported from this path).
        return self._shutdown_if_done(actions, with_cancel=False)

    def set_trial_progress(self, request_id: str, progress: float) -> None:
        """Record a trial's own progress (0..1), used by :meth:`progress`."""
        self.trial_progress[request_id] = float(progress)

    def progress(self) -> float:
        """The search's progress in ``[0, 1]`` (0 when the method's answer is not finite)."""
        value = float(self.method.progress(self.trial_progress, self.trials_closed.keys()))
        if math.isnan(value) or math.isinf(value):
            return 0.0
        return min(max(value, 0.0), 1.0)

    def rung_lengths(self, request_id: str) -> list[int] | None:
        """For ASHA searches, the time-metric lengths of the rungs the trial may still reach."""
        return self.method.rung_lengths(request_id)

    def state_dict(self) -> dict[str, Any]:
        """The whole search state (wrapper, RNG and method) as JSON-ready data, freshly built
        (the method's ``state_dict`` is not copied again; see ``SearchMethod.state_dict``)."""
        return {
            "trials_requested": self.trials_requested,
            "trials_created": dict(self.trials_created),
            "trials_closed": dict(self.trials_closed),
            "exits": dict(self.exits),
            "cancels": dict(self.cancels),
            "failures": dict(self.failures),
            "trial_progress": dict(self.trial_progress),
            "stopped": dict(self.stopped),
            "validated_time": dict(self.validated_time),
            "op_lengths": dict(self.op_lengths),
            "rand": self.rng.state_dict(),
            "search_method_state": self.method.state_dict(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict` output into a Searcher built from the same config."""
        self.trials_requested = int(state.get("trials_requested", 0))
        self.trials_created = {str(k): True for k in state.get("trials_created") or {}}
        self.trials_closed = {str(k): True for k in state.get("trials_closed") or {}}
        self.exits = {str(k): True for k in state.get("exits") or {}}
        self.cancels = {str(k): True for k in state.get("cancels") or {}}
        self.failures = {str(k): True for k in state.get("failures") or {}}
        self.trial_progress = {
            str(k): float(v) for k, v in (state.get("trial_progress") or {}).items()
        }
        self.stopped = {str(k): True for k in state.get("stopped") or {}}
        self.validated_time = {
            str(k): float(v) for k, v in (state.get("validated_time") or {}).items()
        }
        self.op_lengths = {str(k): int(v) for k, v in (state.get("op_lengths") or {}).items()}
        if state.get("rand") is not None:
            self.rng.load_state_dict(state["rand"])
        self.method.load_state_dict(copy.deepcopy(state.get("search_method_state") or {}))
