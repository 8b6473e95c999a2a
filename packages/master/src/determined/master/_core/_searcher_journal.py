"""A searcher that writes down every call that changes its state, and replays such a record.

A :class:`JournaledSearcher` is the master's ``Searcher`` plus a list of the calls made on it since
the list was last taken (:meth:`JournaledSearcher.take_events`). A search method is a pure state
machine seeded by the experiment config, so the searcher built from the config, restored from a
snapshot and fed the calls made after that snapshot (:meth:`JournaledSearcher.replay`), is in
exactly the state the original was in: the same RNG position, rungs, counters and flags.

Each call is a JSON-ready list ``[kind, *args]``:

=====  ================================================  ===========================================
kind   call                                              recorded
=====  ================================================  ===========================================
``i``  ``initial_trials()``                              always
``c``  ``trial_created(rid)``                            always
``v``  ``validation_completed(rid, metrics)``            unless the trial was stopped (a no-op then)
``n``  ``next_operation(rid)``                           the first time only (later calls read only)
``o``  ``operation_completed(rid, length, metric)``      always
``x``  ``trial_exited(rid)``                             always
``e``  ``trial_exited_early(rid, reason name)``          always
``p``  ``set_trial_progress(rid, progress)``             when the value changes
=====  ================================================  ===========================================

A call is recorded before it runs, so a call that raised (the master then fails the experiment)
is replayed too and leaves the same partial state; replay ignores the ``ValueError``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from determined.master.searchers import Searcher
from determined.searcher import Action, ExitedReason


class JournaledSearcher(Searcher):
    """The master's ``Searcher``, recording its state-changing calls (see the module docstring).

    Args:
        config: the whole, validated experiment config.
    """

    def __init__(self, config: Mapping[str, Any]) -> None:
        super().__init__(config)
        self._events: list[list[Any]] = []
        self._recording = True
        self._keep: set[str] | None = None

    def trim_metrics(self) -> None:
        """Record only the searcher metric and the time metric of a validation (enough for a
        method that reads nothing else, as the built-in ones)."""
        self._keep = {k for k in (self.metric_name, self.time_metric) if k}

    def take_events(self) -> list[list[Any]]:
        """The calls recorded since the last take, oldest first; the record starts afresh."""
        events, self._events = self._events, []
        return events

    def has_events(self) -> bool:
        """Whether calls were recorded since the last :meth:`take_events`."""
        return bool(self._events)

    def _note(self, *event: Any) -> None:
        if self._recording:
            self._events.append(list(event))

    # ------------------------------------------------------------------------------------------
    # the recorded calls

    def initial_trials(self) -> list[Action]:
        self._note("i")
        return super().initial_trials()

    def trial_created(self, request_id: str) -> list[Action]:
        self._note("c", request_id)
        return super().trial_created(request_id)

    def validation_completed(self, request_id: str, metrics: Mapping[str, Any]) -> list[Action]:
        if request_id not in self.stopped and isinstance(metrics, Mapping):
            keep = self._keep
            kept = metrics if keep is None else {k: metrics[k] for k in keep if k in metrics}
            self._note("v", request_id, dict(kept))
        return super().validation_completed(request_id, metrics)

    def next_operation(self, request_id: str) -> int | None:
        if request_id not in self.op_lengths:
            self._note("n", request_id)
        return super().next_operation(request_id)

    def operation_completed(
        self, request_id: str, length: int, searcher_metric: float
    ) -> list[Action]:
        self._note("o", request_id, int(length), searcher_metric)
        return super().operation_completed(request_id, length, searcher_metric)

    def trial_exited(self, request_id: str) -> list[Action]:
        self._note("x", request_id)
        return super().trial_exited(request_id)

    def trial_exited_early(self, request_id: str, reason: ExitedReason) -> list[Action]:
        reason = ExitedReason(reason)
        self._note("e", request_id, reason.name)
        return super().trial_exited_early(request_id, reason)

    def set_trial_progress(self, request_id: str, progress: float) -> None:
        progress = float(progress)
        if self.trial_progress.get(request_id) != progress:
            self._note("p", request_id, progress)
        super().set_trial_progress(request_id, progress)

    # ------------------------------------------------------------------------------------------
    # replay

    def replay(self, events: list[list[Any]]) -> None:
        """Apply recorded calls again (their actions were applied when they first ran)."""
        self._recording = False
        try:
            for event in events:
                try:
                    self._apply(event)
                except ValueError:
                    pass  # it raised the first time too; the experiment failed then
        finally:
            self._recording = True

    def _apply(self, event: list[Any]) -> None:
        kind, args = event[0], event[1:]
        if kind == "i":
            self.initial_trials()
        elif kind == "c":
            self.trial_created(args[0])
        elif kind == "v":
            self.validation_completed(args[0], args[1])
        elif kind == "n":
            self.next_operation(args[0])
        elif kind == "o":
            self.operation_completed(args[0], args[1], args[2])
        elif kind == "x":
            self.trial_exited(args[0])
        elif kind == "e":
            self.trial_exited_early(args[0], ExitedReason[args[1]])
        elif kind == "p":
            self.set_trial_progress(args[0], args[1])
        else:
            raise RuntimeError(f"searcher event log: unknown event {event!r}")
