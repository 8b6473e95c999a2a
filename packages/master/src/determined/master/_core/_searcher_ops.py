"""The searcher-operations protocol (Core API's ``searcher.operations()``, upstream 0.37 and
earlier), served from the experiment's searcher.

A trial asks for the length to train to next and reports each operation completed with its
searcher metric; ASHA promotes or stops it from there. Experiments re-run by ``continue`` have no
searcher: their trials get one operation of the full length.
"""

from __future__ import annotations

import threading
from typing import Any, NamedTuple, cast

from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session

from determined.master._core._allocations import Allocations
from determined.master._core._experiments import get_trial
from determined.master._core._lifecycle import Lifecycle
from determined.master._core._searcher_state import SearcherStates
from determined.master._core._transactions import Transactions
from determined.master._wire import TERMINAL_STATES, APIError
from determined.master.db import Experiment, Run

_LIVE_STATES = ("ACTIVE", "PAUSED")
_TRIAL_GATE = (
    select(
        Run.state,
        Run.request_id,
        Run.early_stopped_by_searcher,
        Experiment.id.label("exp_id"),
        Experiment.state.label("exp_state"),
    )
    .join(Experiment, Experiment.id == Run.experiment_id)
    .where(Run.id == bindparam("trial_id"))
)
"""What a trial's every ``searcher/operation`` question reads (Core, built once: the ORM rows of
the trial and its experiment, config decoded, were most of the route's CPU)."""
_ASK_SEARCHER = object()
"""What :meth:`SearcherOperations._answer_without_searcher` returns when the searcher decides."""


class SearcherOperations:
    """Answers ``searcher/operation`` and ``searcher/completed_operation`` of running trials."""

    def __init__(
        self,
        transactions: Transactions,
        lifecycle: Lifecycle,
        searchers: SearcherStates,
        allocations: Allocations,
    ) -> None:
        self._transactions = transactions
        self._lifecycle = lifecycle
        self._searchers = searchers
        self._allocations = allocations
        self._continued_lock = threading.Lock()
        self._continued_done: dict[tuple[int, int], int] = {}
        """For experiments re-run by ``continue``: (trial id, run id) -> completed length."""

    def _check_caller(self, caller_allocation_id: str | None, run_id: int) -> None:
        """A trial's allocation token may only drive its own trial's operations."""
        if caller_allocation_id is None:
            return
        trial_id = self._allocations.trial_of(caller_allocation_id)
        if trial_id is not None and trial_id != run_id:
            raise APIError(403, f"allocation {caller_allocation_id} does not run trial {run_id}")

    def next_operation(self, trial_id: int, caller_allocation_id: str | None) -> int | None:
        """The length the trial should train to next; None once the searcher needs nothing more
        from it (it was stopped, e.g. by ASHA, or completed every operation).

        Only a trial's first question changes the searcher (it marks the trial as one on the
        operations protocol); every later one is answered in a read, without a write transaction.
        """
        with self._transactions.lock:
            if not self._unasked(trial_id, caller_allocation_id):
                answer = self._read_answer(trial_id, caller_allocation_id)
                if answer is not _ASK_SEARCHER:
                    return cast("int | None", answer)
            with self._transactions.txn() as session:
                answer = self._gate_answer(session, trial_id, caller_allocation_id, write=True)
                if answer is not _ASK_SEARCHER:
                    return cast("int | None", answer)
                run, exp = get_trial(session, trial_id)
                answer = self._answer_without_searcher(run, exp, caller_allocation_id)
                if answer is not _ASK_SEARCHER:
                    return cast("int | None", answer)
                searcher = self._searchers.of(exp)
                length = self._ask(searcher, run.request_id)
                # Persists that the trial uses operations.
                self._lifecycle.apply_actions(session, exp, [])
                return length

    def _unasked(self, trial_id: int, caller_allocation_id: str | None) -> bool:
        """Whether this is certainly the trial's first question (its caller's allocation names
        the searcher and the trial's request, and the searcher has no operation for it yet): the
        read of :meth:`_read_answer` could not answer it, so it is skipped."""
        alloc = self._allocations.get(caller_allocation_id) if caller_allocation_id else None
        if alloc is None or alloc.trial_id != trial_id or not alloc.request_id:
            return False
        if self._searchers.is_continued(alloc.experiment_id):
            return False
        searcher = self._searchers.loaded(alloc.experiment_id)
        return searcher is not None and alloc.request_id not in searcher.op_lengths

    def _read_answer(self, trial_id: int, caller_allocation_id: str | None) -> int | object | None:
        """The answer from a read, without a write transaction (every question after a trial's
        first); :data:`_ASK_SEARCHER` when only the write in :meth:`next_operation` can answer."""
        with self._transactions.db.read() as session:
            return self._gate_answer(session, trial_id, caller_allocation_id, write=False)

    def _gate_answer(
        self, session: Session, trial_id: int, caller_allocation_id: str | None, *, write: bool
    ) -> int | object | None:
        """The answer from the trial's gate row and the searcher in memory, no ORM rows loaded.
        In a read, only a question the searcher has seen is answered; in the write of
        :meth:`next_operation` (``write``) a first one is too, and recorded. :data:`_ASK_SEARCHER`
        when the searcher is not in memory, or, in a read, the question is new."""
        gate = session.connection().execute(_TRIAL_GATE, {"trial_id": trial_id}).first()
        if gate is None:
            return _ASK_SEARCHER  # the ORM path answers the 404
        self._check_caller(caller_allocation_id, trial_id)
        if not _live(gate.state, gate.exp_state, gate.early_stopped_by_searcher):
            return None
        if self._searchers.is_continued(gate.exp_id):
            run, exp = get_trial(session, trial_id)
            return self._answer_without_searcher(run, exp, None)
        searcher = self._searchers.loaded(gate.exp_id)
        if searcher is None or (not write and gate.request_id not in searcher.op_lengths):
            return _ASK_SEARCHER
        length = self._ask(searcher, gate.request_id)
        if write:
            # Persists that the trial uses operations. The experiment is live, so nothing else
            # of ``apply_actions`` applies, and a question leaves the search's progress as it was.
            self._searchers.record(session, gate.exp_id)
        return length

    def _answer_without_searcher(
        self, run: Run, exp: Experiment, caller_allocation_id: str | None
    ) -> int | object | None:
        """The answer when the searcher has no say (the trial or experiment is not live, or the
        experiment was re-run by ``continue``); :data:`_ASK_SEARCHER` otherwise."""
        self._check_caller(caller_allocation_id, run.id)
        if not _live(run.state, exp.state, run.early_stopped_by_searcher):
            return None
        if self._searchers.is_continued(exp.id):
            full = _full_length(exp)
            with self._continued_lock:
                done = self._continued_done.get((run.id, run.run_id), 0)
            return full if done < full else None
        return _ASK_SEARCHER

    @staticmethod
    def _ask(searcher: Any, request_id: str) -> int | None:
        try:
            length = searcher.next_operation(request_id)
        except ValueError as e:
            raise APIError(400, str(e)) from None
        return int(length) if length is not None else None

    def operation_completed(
        self, trial_id: int, caller_allocation_id: str | None, length: int, metric: float
    ) -> Next | None:
        """The trial trained to ``length``; the searcher hears it as a validation of ``metric``.

        Returns the trial's next operation as :meth:`next_operation` answers right after (so the
        trial need not ask: one request per operation instead of two); None if the searcher does
        not count the trial as one on the operations protocol (completing an operation makes it
        one) and in the other cases of :meth:`_following`: then the trial asks."""
        with self._transactions.txn() as session:
            run, exp = get_trial(session, trial_id)
            self._check_caller(caller_allocation_id, run.id)
            if exp.state in TERMINAL_STATES or run.state in TERMINAL_STATES:
                return Next(None)
            if self._searchers.is_continued(exp.id):
                with self._continued_lock:
                    key = (run.id, run.run_id)
                    self._continued_done[key] = max(self._continued_done.get(key, 0), length)
            else:
                request_id = run.request_id
                self._lifecycle.searcher_event(
                    session, exp, lambda s: s.operation_completed(request_id, length, metric)
                )
            # The searcher's decisions are in `run` and `exp` now (one session, one identity map).
            return self._following(run, exp)

    def _following(self, run: Run, exp: Experiment) -> Next | None:
        """What :meth:`next_operation` would answer now, without writing; None when only the
        question can answer (an unmanaged experiment, a trial the searcher does not count as
        one on the protocol, or an answer that is an error: the completion stands)."""
        if exp.unmanaged:
            return None
        try:
            answer = self._answer_without_searcher(run, exp, None)
            if answer is not _ASK_SEARCHER:
                return Next(cast("int | None", answer))
            searcher = self._searchers.of(exp)
            if run.request_id not in searcher.op_lengths:
                return None
            return Next(self._ask(searcher, run.request_id))
        except APIError:
            return None


class Next(NamedTuple):
    """A trial's next operation given with its completed one: ``length`` None when the searcher
    needs nothing more from it."""

    length: int | None


def _live(state: str, exp_state: str, early_stopped: bool) -> bool:
    """Whether the searcher still has a say over a trial: it and its experiment are live and the
    searcher has not stopped it."""
    return state in _LIVE_STATES and exp_state in _LIVE_STATES and not early_stopped


def _full_length(exp: Experiment) -> int:
    from determined.master.searchers._config import get_length

    try:
        return get_length(exp.config.get("searcher") or {})[1]
    except ValueError as e:
        raise APIError(400, str(e)) from None
