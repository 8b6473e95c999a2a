"""The experiment and trial state machine (upstream's experiment/trial actors), searcher included.

Every method runs inside a lifecycle transaction the caller holds (``session``): it changes rows,
asks the allocations service for allocations, kills and preemption signals, and feeds the
experiment's searcher, whose actions (create, stop, shutdown) it applies in the same transaction.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any

from sqlalchemy import bindparam, insert, select, update
from sqlalchemy.orm import Session

from determined.master import _wire
from determined.master._core._allocations import Allocations
from determined.master._core._held_rows import held, write_at_commit
from determined.master._core._searcher_state import SearcherStates
from determined.master._core._task_logs import master_log
from determined.master._core._transactions import Transactions
from determined.master._wire import STOP_TO_TERMINAL
from determined.master.db import Experiment, Run, Task, latest_completed_checkpoint, utcnow

DEFAULT_PREEMPTION_TIMEOUT = 3600.0

# Statements of every trial's path, built once (building a statement and its cache key was about a
# third of a call's CPU, measured on ``get_trial``).
_RUN_OF_REQUEST = select(Run).where(
    Run.experiment_id == bindparam("exp_id"), Run.request_id == bindparam("request_id")
)
_INSERT_TASK = insert(Task)
_END_TASK = update(Task).where(Task.task_id == bindparam("tid")).values(end_time=bindparam("ended"))


class Lifecycle:
    """State transitions of experiments and trials; the searcher's events and actions."""

    def __init__(
        self,
        transactions: Transactions,
        allocations: Allocations,
        searchers: SearcherStates,
        rm: Any,
        start_gc: Callable[[int], None],
    ) -> None:
        self._transactions = transactions
        self._allocations = allocations
        self._searchers = searchers
        self._rm = rm
        self._start_gc = start_gc

    @property
    def rm(self) -> Any:
        """The resource manager trials are scheduled on."""
        return self._rm

    def runs(self, session: Session, exp_id: int) -> list[Run]:
        """The trials of an experiment, oldest first."""
        return list(
            session.scalars(select(Run).where(Run.experiment_id == exp_id).order_by(Run.id))
        )

    # ------------------------------------------------------------------------------------------
    # the searcher

    def searcher_event(
        self,
        session: Session,
        exp: Experiment,
        call: Callable[[Any], list[Any]],
        stop_note: tuple[str, str] | None = None,
    ) -> None:
        """Feed one event to the experiment's searcher and apply the actions it answers
        (unmanaged experiments have no searcher on the master).

        ``stop_note``: ``(request_id, text)``: should the searcher stop that trial in answer, the
        trial's log says so with ``text`` (e.g. which validation it stopped at)."""
        if exp.state in _wire.TERMINAL_STATES or exp.unmanaged:
            return
        searcher = self._searchers.of(exp)
        try:
            actions = list(call(searcher) or [])
        except ValueError as e:
            self._searcher_failed(session, exp, str(e))
            return
        self.apply_actions(session, exp, actions, stop_note)

    def _searcher_failed(self, session: Session, exp: Experiment, message: str) -> None:
        exp.error = message
        for run in self.runs(session, exp.id):
            master_log(session, run.task_id, f"searcher error: {message}", "LOG_LEVEL_ERROR")
        if exp.state not in _wire.TERMINAL_STATES:
            self.stop_experiment(session, exp, "STOPPING_ERROR")

    def apply_actions(
        self,
        session: Session,
        exp: Experiment,
        actions: list[Any],
        stop_note: tuple[str, str] | None = None,
    ) -> None:
        """Apply searcher actions (and those they lead to), then persist the searcher's state
        (``stop_note``: see :meth:`searcher_event`)."""
        from determined.searcher import Create, Shutdown, Stop

        searcher = self._searchers.of(exp)
        pending = collections.deque(actions)
        while pending:
            action = pending.popleft()
            stopping = exp.state not in ("ACTIVE", "PAUSED")
            if isinstance(action, Shutdown):
                if not stopping:
                    target = (
                        "STOPPING_ERROR"
                        if action.failure
                        else "STOPPING_CANCELED"
                        if action.cancel
                        else "STOPPING_COMPLETED"
                    )
                    self.stop_experiment(session, exp, target)
                continue
            if stopping:
                continue
            try:
                if isinstance(action, Create):
                    self._create_trial(session, exp, action)
                    pending.extend(searcher.trial_created(action.request_id))
                elif isinstance(action, Stop):
                    note = stop_note[1] if stop_note and stop_note[0] == action.request_id else ""
                    pending.extend(self._searcher_stop(session, exp, action.request_id, note))
            except ValueError as e:
                self._searcher_failed(session, exp, str(e))
                return
        self._searchers.snapshot(session, exp)
        self.maybe_finish(session, exp)

    def _searcher_stop(
        self, session: Session, exp: Experiment, request_id: str, note: str = ""
    ) -> list[Any]:
        # the searcher mostly stops the trial whose completed operation it was just told of,
        # which this transaction loaded
        run = held(session, Run, experiment_id=exp.id, request_id=request_id) or session.scalar(
            _RUN_OF_REQUEST, {"exp_id": exp.id, "request_id": request_id}
        )
        if run is None or run.state in _wire.TERMINAL_STATES:
            return []
        run.early_stopped_by_searcher = True
        alloc = self._allocations.live(run.id)
        if alloc is not None and not alloc.assigned:
            self._allocations.end_unlaunched(session, alloc, "stopped by the searcher")
            alloc = None
        if alloc is None:
            self.set_trial_state(session, run, "COMPLETED")
            return list(self._searchers.of(exp).trial_exited(request_id))
        self.set_trial_state(session, run, "STOPPING_COMPLETED")
        master_log(
            session, run.task_id, f"the searcher stopped this trial{note}; asking it to preempt"
        )
        self._allocations.request_preemption(alloc, preemption_timeout(exp))
        return []

    # ------------------------------------------------------------------------------------------
    # experiments and trials

    def create_experiment(self, session: Session, exp: Experiment) -> None:
        """Register a new experiment row with the RM and the searcher; create its first trials."""
        session.add(exp)
        session.flush()
        exp.job_id = f"exp-{exp.id}"
        job_id, priority, weight, max_slots = exp.job_id, exp.priority, exp.weight, exp.max_slots
        self._transactions.effect(
            lambda: self._rm.set_job_limits(
                job_id, priority=priority, weight=weight, max_slots=max_slots
            )
        )
        self._searchers.create(exp)
        self.searcher_event(session, exp, lambda s: s.initial_trials())

    def _create_trial(self, session: Session, exp: Experiment, action: Any) -> Run:
        warm, lineage = _warm_start(session, exp, action)
        active = exp.state == "ACTIVE"
        run = Run(
            experiment_id=exp.id,
            request_id=action.request_id,
            task_id=f"{exp.id}.{action.request_id}",
            state="ACTIVE" if active else "PAUSED",
            # the first allocation's run id goes in the INSERT, not in an UPDATE after it
            run_id=1 if active else 0,
            hparams=action.hparams,
            seed=action.trial_seed,
            warm_start_checkpoint_uuid=warm,
            summary_metrics={},
            metadata_={},
        )
        session.add(run)
        session.flush()
        session.connection().execute(  # Core: the row is not read back in the transaction
            _INSERT_TASK,
            {
                "task_id": run.task_id,
                "task_type": "TRIAL",
                "job_id": exp.job_id,
                "trial_id": run.id,
            },
        )
        if lineage:
            master_log(session, run.task_id, f"Trial {run.id} is {lineage}")
        if active:
            self._allocations.request(session, exp, run, numbered=True)
        return run

    def set_trial_state(self, session: Session, run: Run, new_state: str) -> None:
        """Move a trial to ``new_state`` and say so in its logs."""
        if run.state == new_state:
            return
        run.state = new_state
        if new_state in _wire.TERMINAL_STATES:
            run.end_time = utcnow()
            # The trial's current task ends with it (an UPDATE: loading the row first cost a
            # SELECT on every trial's end), written with the other trials' ends at the commit.
            ended = {"tid": run.task_id, "ended": run.end_time}
            write_at_commit(session, _END_TASK, ended)
        master_log(session, run.task_id, f"Trial {run.id} is now {new_state}")

    def stop_experiment(self, session: Session, exp: Experiment, target: str) -> None:
        """Move ``exp`` to a STOPPING_* state and stop its trials accordingly."""
        if exp.state in _wire.TERMINAL_STATES:
            return
        exp.state = target
        timeout = preemption_timeout(exp)
        for run in self.runs(session, exp.id):
            if run.state in _wire.TERMINAL_STATES:
                continue
            alloc = self._allocations.live(run.id)
            if alloc is not None and not alloc.launched and not alloc.assigned:
                self._allocations.end_unlaunched(session, alloc, f"experiment {target}")
                alloc = None
            if alloc is None:
                self.set_trial_state(session, run, STOP_TO_TERMINAL[target])
                continue
            self.set_trial_state(session, run, max_stopping(run.state, target))
            if target in ("STOPPING_KILLED", "STOPPING_ERROR"):
                self._allocations.kill(alloc)
            else:
                self._allocations.request_preemption(alloc, timeout)
        self.maybe_finish(session, exp)

    def maybe_finish(self, session: Session, exp: Experiment) -> None:
        """End a stopping experiment once none of its trials is alive."""
        if exp.state not in STOP_TO_TERMINAL:
            return
        if any(r.state not in _wire.TERMINAL_STATES for r in self.runs(session, exp.id)):
            return
        exp.state = STOP_TO_TERMINAL[exp.state]
        exp.end_time = utcnow()
        if exp.state == "COMPLETED":
            exp.progress = 1.0
        self._searchers.forget(session, exp.id)
        self._allocations.owner_sessions.end(session, exp.id)
        exp_id = exp.id
        self._transactions.effect(lambda: self._start_gc(exp_id))

    def pause(self, session: Session, exp: Experiment) -> None:
        """Pause an active experiment: running trials get the preemption signal."""
        if exp.state == "PAUSED":
            return
        if exp.state != "ACTIVE":
            raise _wire.APIError(400, f"experiment {exp.id} is {exp.state}; only ACTIVE can pause")
        exp.state = "PAUSED"
        timeout = preemption_timeout(exp)
        for run in self.runs(session, exp.id):
            if run.state != "ACTIVE":
                continue
            alloc = self._allocations.live(run.id)
            if alloc is not None and not alloc.assigned:
                self._allocations.end_unlaunched(session, alloc, "experiment paused")
            elif alloc is not None:
                self._allocations.request_preemption(alloc, timeout)
            self.set_trial_state(session, run, "PAUSED")

    def activate(self, session: Session, exp: Experiment) -> None:
        """Activate a paused experiment: its paused trials are scheduled again."""
        if exp.state == "ACTIVE":
            return
        if exp.state != "PAUSED":
            raise _wire.APIError(
                400, f"experiment {exp.id} is {exp.state}; only PAUSED can activate"
            )
        exp.state = "ACTIVE"
        for run in self.runs(session, exp.id):
            if run.state != "PAUSED":
                continue
            self.set_trial_state(session, run, "ACTIVE")
            if self._allocations.live(run.id) is None:
                self._allocations.request(session, exp, run)

    def kill_trial(self, session: Session, exp: Experiment, run: Run) -> None:
        """Kill one trial (the searcher hears a user cancel once it is gone)."""
        if run.state in _wire.TERMINAL_STATES:
            return
        alloc = self._allocations.live(run.id)
        if alloc is not None and not alloc.assigned:
            self._allocations.end_unlaunched(session, alloc, "trial killed")
            alloc = None
        if alloc is None:
            self.set_trial_state(session, run, "CANCELED")
            self.searcher_event(
                session,
                exp,
                lambda s: s.trial_exited_early(run.request_id, exited_reason("USER_CANCELED")),
            )
            self.maybe_finish(session, exp)
            return
        self.set_trial_state(session, run, "STOPPING_KILLED")
        self._allocations.kill(alloc)

    def restart_trial(self, session: Session, exp: Experiment, run: Run) -> None:
        """Schedule a new allocation (run) of ``run``."""
        self._allocations.request(session, exp, run)


def preemption_timeout(exp: Experiment) -> float:
    """Seconds a preempted trial gets to exit before it is killed."""
    value = exp.config.get("preemption_timeout")
    return float(value) if value is not None else DEFAULT_PREEMPTION_TIMEOUT


def max_stopping(current: str, target: str) -> str:
    """Stopping states only degrade: COMPLETED < CANCELED < KILLED < ERROR."""
    order = ["STOPPING_COMPLETED", "STOPPING_CANCELED", "STOPPING_KILLED", "STOPPING_ERROR"]
    if current in order and order.index(current) > order.index(target):
        return current
    return target


def exited_reason(name: str) -> Any:
    """The searcher's ``ExitedReason`` for an upstream ``EXITED_REASON_*`` name."""
    from determined.searcher import ExitedReason

    name = name.removeprefix("EXITED_REASON_")
    return ExitedReason[name]


def _warm_start(session: Session, exp: Experiment, action: Any) -> tuple[str | None, str | None]:
    """The checkpoint a new trial starts from (the searcher's source checkpoint or trial, or for
    population-based training its parent's latest) and the line its log says so with, if any."""
    searcher_cfg = exp.config.get("searcher") or {}
    warm = searcher_cfg.get("source_checkpoint_uuid")
    source_trial = searcher_cfg.get("source_trial_id")
    if not warm and source_trial:
        ckpt = latest_completed_checkpoint(session, int(source_trial))
        warm = ckpt.uuid if ckpt is not None else None
    lineage = None
    if action.parent_request_id:
        # Population-based training: start from the parent trial's latest checkpoint.
        parent = session.scalar(
            _RUN_OF_REQUEST, {"exp_id": exp.id, "request_id": action.parent_request_id}
        )
        ckpt = (
            latest_completed_checkpoint(session, parent.id, action.parent_steps) if parent else None
        )
        warm = ckpt.uuid if ckpt is not None else None
        if parent is not None and ckpt is not None:
            lineage = (
                f"warm-started from trial {parent.id}'s checkpoint {ckpt.uuid} "
                f"({ckpt.steps_completed} steps completed)"
            )
        elif parent is not None:
            lineage = f"trial {parent.id} has no checkpoint to start from; starting fresh"
    return warm, lineage
