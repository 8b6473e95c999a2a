"""The experiments service: what the REST routes may do to experiments and trials.

Each method is one lifecycle transaction, addressed by id, taking values the API edge already parsed
and validated. Routes never open the lifecycle transaction or touch the state machine themselves.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterable
from typing import Any

from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session
from sqlalchemy.orm.util import identity_key

from determined.master._core._lifecycle import Lifecycle
from determined.master._core._searcher_state import SearcherStates
from determined.master._core._transactions import Transactions
from determined.master._core._trial_tasks import start_new_task
from determined.master._wire import TERMINAL_STATES, APIError
from determined.master.db import Experiment, Metric, Run, User


@dataclasses.dataclass(frozen=True)
class ExperimentPatch:
    """The changes of ``PATCH /api/v1/experiments/{id}`` (None: leave as is)."""

    name: str | None = None
    description: str | None = None
    notes: str | None = None
    labels: list[str] | None = None
    max_slots: int | None = None
    weight: float | None = None
    priority: int | None = None
    resources_given: bool = False
    """Whether the patch had a ``resources`` object (the config's section is rewritten then)."""
    gc_policy: dict[str, int] | None = None
    """New ``save_*`` values of ``checkpoint_storage``; a finished experiment is collected again."""


def get_experiment(session: Session, exp_id: int) -> Experiment:
    """An experiment that is not deleted, or a 404."""
    exp = session.get(Experiment, exp_id)
    if exp is None or exp.state == "DELETED":
        raise APIError(404, f"experiment {exp_id} not found")
    return exp


_TRIAL_WITH_EXPERIMENT = (
    select(Run, Experiment)
    .outerjoin(Experiment, Experiment.id == Run.experiment_id)
    .where(Run.id == bindparam("trial_id"))
)
"""Built once: building the statement and its cache key was a third of each call's CPU."""


_TRIALS_WITH_EXPERIMENTS = (
    select(Run, Experiment)
    .join(Experiment, Experiment.id == Run.experiment_id)
    .where(Run.id.in_(bindparam("trial_ids", expanding=True)))
)


def load_trials(session: Session, trial_ids: Iterable[int]) -> list[Any]:
    """Load trials and their experiments into ``session`` with one SELECT, so that
    :func:`get_trial` finds each without its own (exits handled together). The caller keeps the
    returned rows for as long as it needs them loaded: the session holds its objects weakly."""
    ids = [t for t in trial_ids if identity_key(Run, t) not in session.identity_map]
    if len(ids) < 2:
        return []  # for one, get_trial's own SELECT is the same
    with session.no_autoflush:
        return list(session.execute(_TRIALS_WITH_EXPERIMENTS, {"trial_ids": ids}).all())


def get_trial(session: Session, trial_id: int) -> tuple[Run, Experiment]:
    """A trial and its experiment, or a 404 (one joined SELECT when neither is loaded yet: this is
    on every trial request's path).

    The SELECT does not flush the session first: a trial or experiment with unflushed changes is
    loaded already, and the identity map gives it back as it is, so no flush could change what
    this returns; exits handled together then flush once, at their commit, not once each."""
    if identity_key(Run, trial_id) not in session.identity_map:
        with session.no_autoflush:
            row = session.execute(_TRIAL_WITH_EXPERIMENT, {"trial_id": trial_id}).first()
        if row is not None and row[1] is not None:
            return row[0], row[1]
    run = session.get(Run, trial_id)
    if run is None:
        raise APIError(404, f"trial {trial_id} not found")
    exp = session.get(Experiment, run.experiment_id)
    if exp is None:
        raise APIError(404, f"experiment of trial {trial_id} not found")
    return run, exp


class Experiments:
    """Experiment and trial operations of the REST API, one transaction each."""

    def __init__(
        self,
        transactions: Transactions,
        lifecycle: Lifecycle,
        searchers: SearcherStates,
        rm: Any,
        start_gc: Callable[[int], None],
    ) -> None:
        self._transactions = transactions
        self._lifecycle = lifecycle
        self._searchers = searchers
        self._rm = rm
        self._start_gc = start_gc

    def create(
        self,
        *,
        owner_id: int,
        config: dict[str, Any],
        original: str,
        model_definition: bytes | None,
        activate: bool,
        parent_id: int | None,
        project_id: int,
    ) -> int:
        """Create an experiment from a validated config; returns its id."""
        resources = config.get("resources") or {}
        priority = resources.get("priority")
        with self._transactions.txn() as session:
            if session.get(User, owner_id) is None:
                raise APIError(401, "the calling user no longer exists")
            exp = Experiment(
                state="ACTIVE" if activate else "PAUSED",
                config=config,
                original_config=original,
                model_definition=model_definition,
                owner_id=owner_id,
                parent_id=parent_id,
                project_id=project_id or 1,
                labels=list(config.get("labels") or []),
                notes="",
                priority=int(priority) if priority is not None else 42,
                weight=float(resources.get("weight") or 1.0),
                max_slots=resources.get("max_slots"),
                progress=0.0,
            )
            self._lifecycle.create_experiment(session, exp)
            return exp.id

    def patch(self, exp_id: int, patch: ExperimentPatch) -> None:
        """Apply ``patch``: metadata, scheduling limits (told to the RM), the GC policy."""
        with self._transactions.txn() as session:
            exp = get_experiment(session, exp_id)
            config = dict(exp.config)
            if patch.name is not None:
                config["name"] = patch.name
            if patch.description is not None:
                config["description"] = patch.description
            if patch.notes is not None:
                exp.notes = patch.notes
            if patch.labels is not None:
                exp.labels = list(dict.fromkeys(patch.labels))
                config["labels"] = exp.labels
            if patch.resources_given:
                config["resources"] = self._patch_resources(exp, config, patch)
            if patch.gc_policy is not None:
                config["checkpoint_storage"] = {
                    **(config.get("checkpoint_storage") or {}),
                    **patch.gc_policy,
                }
                if exp.state in TERMINAL_STATES:
                    # Like upstream (`det e set gc-policy`), a finished experiment is collected at
                    # once under its new policy; a running one is collected when it ends.
                    gc_exp_id = exp.id
                    self._transactions.effect(lambda: self._start_gc(gc_exp_id))
            exp.config = config

    def _patch_resources(
        self, exp: Experiment, config: dict[str, Any], patch: ExperimentPatch
    ) -> dict[str, Any]:
        resources = dict(config.get("resources") or {})
        limits: dict[str, Any] = {}
        if patch.max_slots is not None:
            exp.max_slots = resources["max_slots"] = limits["max_slots"] = patch.max_slots
        if patch.weight is not None:
            exp.weight = resources["weight"] = limits["weight"] = patch.weight
        if patch.priority is not None:
            exp.priority = resources["priority"] = limits["priority"] = patch.priority
        if limits:
            job_id = exp.job_id
            self._transactions.effect(lambda: self._rm.set_job_limits(job_id, **limits))
        return resources

    def act(self, exp_id: int, action: str) -> None:
        """``activate``, ``pause``, ``cancel``, ``kill``, ``archive`` or ``unarchive``."""
        lifecycle = self._lifecycle
        with self._transactions.txn() as session:
            exp = get_experiment(session, exp_id)
            if exp.unmanaged and action in ("activate", "pause"):
                raise APIError(
                    400,
                    f"experiment {exp_id} is unmanaged: its own process runs it, not the master",
                )
            if action == "activate":
                lifecycle.activate(session, exp)
            elif action == "pause":
                lifecycle.pause(session, exp)
            elif action in ("cancel", "kill"):
                if exp.state in TERMINAL_STATES:
                    return
                if action == "cancel" and exp.state in ("STOPPING_KILLED", "STOPPING_ERROR"):
                    return
                target = "STOPPING_CANCELED" if action == "cancel" else "STOPPING_KILLED"
                lifecycle.stop_experiment(session, exp, target)
            elif action in ("archive", "unarchive"):
                if exp.state not in TERMINAL_STATES:
                    raise APIError(400, "Experiment is not in terminal state.")
                exp.archived = action == "archive"
            else:
                raise ValueError(f"unknown experiment action {action!r}")

    def continue_trials(
        self,
        exp_id: int,
        config: dict[str, Any],
        single_trial_hparams: dict[str, Any] | None,
    ) -> None:
        """Re-run a terminal experiment's unfinished trials (its only trial, for a single-trial
        experiment) under ``config``; they no longer report to a searcher.

        ``single_trial_hparams``: new hyperparameters of a single-trial experiment's trial.
        """
        lifecycle = self._lifecycle
        with self._transactions.txn() as session:
            exp = get_experiment(session, exp_id)
            if exp.state not in TERMINAL_STATES:
                raise APIError(400, "Experiment is not in terminal state.")
            runs = lifecycle.runs(session, exp_id)
            # A single-trial experiment re-runs its trial; otherwise only unfinished trials run.
            targets = runs if len(runs) == 1 else [r for r in runs if r.state != "COMPLETED"]
            if not targets:
                raise APIError(400, "every trial of this experiment completed; nothing to continue")
            exp.config = config
            exp.state = "ACTIVE"
            exp.end_time = None
            exp.error = None
            for run in targets:
                if single_trial_hparams is not None and len(runs) == 1:
                    run.hparams = single_trial_hparams
                run.restarts = 0
                run.end_time = None
                run.early_stopped_by_searcher = False
                start_new_task(session, exp, run)  # upstream: a new task "<task id>-N"
                lifecycle.set_trial_state(session, run, "ACTIVE")
                lifecycle.restart_trial(session, exp, run)
            self._searchers.set_continued(exp.id, True)

    def delete(self, exp_id: int, requester: User) -> None:
        """Delete a terminal experiment with its checkpoints and rows (owner or admin)."""
        from determined.master._core._experiment_deletion import delete_experiment

        delete_experiment(self._transactions.db, exp_id, requester)

    def kill_trial(self, trial_id: int) -> None:
        """Kill one trial."""
        with self._transactions.txn() as session:
            run, exp = get_trial(session, trial_id)
            self._lifecycle.kill_trial(session, exp, run)

    def report_progress(self, trial_id: int, progress: float) -> None:
        """Record a trial's progress; the searcher turns it into the experiment's."""
        with self._transactions.txn() as session:
            run, exp = get_trial(session, trial_id)
            run.progress = progress
            if exp.unmanaged:
                exp.progress = progress
            rid = run.request_id
            if not self._searchers.is_continued(exp.id):
                self._lifecycle.searcher_event(
                    session, exp, lambda s: s.set_trial_progress(rid, progress)
                )

    def validations_stored(self, session: Session, run: Run, rows: list[Metric]) -> None:
        """The metrics writer stored validation reports of ``run``: the searcher hears each, in
        order, in the writer's transaction."""
        if self._searchers.is_continued(run.experiment_id):
            return
        exp = session.get(Experiment, run.experiment_id)
        if exp is None:
            return
        for row in rows:
            avg = row.metrics.get("avg_metrics") or {}
            # A trial trains on while its report waits to be stored, so under load it has trained
            # well past the validation the searcher stopped it at: its log names that one.
            note = f" at its validation after {row.total_batches} batches"
            self._lifecycle.searcher_event(
                session,
                exp,
                functools.partial(_validation_completed, run.request_id, avg),
                (run.request_id, note),
            )


def _validation_completed(request_id: str, metrics: dict[str, Any], searcher: Any) -> Any:
    return searcher.validation_completed(request_id, metrics)
