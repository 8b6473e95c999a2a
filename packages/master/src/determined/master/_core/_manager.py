"""The experiment and trial lifecycle: searcher wiring, scheduling, launch and exits.

Every lifecycle change runs under one lock and commits before anything is acknowledged; calls into
the resource manager and preemption signals are collected as effects and run after the commit.
Resource-manager events arrive on RM threads and are queued to one dispatcher thread, so an RM may
call back while holding its own locks.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import functools
import logging
import pathlib
import queue
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from determined.master import _auth, _wire
from determined.master._core._metrics_writer import MetricsWriter
from determined.master._wire import STOP_TO_TERMINAL
from determined.master.db import (
    Allocation,
    Checkpoint,
    Database,
    Experiment,
    ExperimentSnapshot,
    Run,
    Task,
    TaskLog,
    User,
    utcnow,
)

logger = logging.getLogger("determined.master")

DEFAULT_PREEMPTION_TIMEOUT = 3600.0


@dataclasses.dataclass
class AllocState:
    """What the master keeps in memory about one live allocation."""

    allocation_id: str
    trial_id: int
    experiment_id: int
    task_id: str
    token: str
    preempt: bool = False
    acked: bool = False
    assigned: bool = False
    launched: bool = False
    cancelled: bool = False
    kill_requested: bool = False
    preemption_timed_out: bool = False
    exited: bool = False
    timer: threading.Timer | None = None


class Manager:
    """Owns experiments, trials and allocations of one master."""

    def __init__(
        self,
        db: Database,
        rm: Any,
        data_dir: pathlib.Path,
        checkpoint_storage: dict[str, Any],
        cluster_id: str,
    ) -> None:
        self.db = db
        self.rm = rm
        self.data_dir = data_dir
        self.checkpoint_storage = checkpoint_storage
        self.cluster_id = cluster_id
        self.master_url = ""
        self.lock = threading.RLock()
        self.searchers: dict[int, Any] = {}
        self.allocs: dict[str, AllocState] = {}
        self.trial_alloc: dict[int, str] = {}
        self._effects: list[Callable[[], None]] = []
        self._events: queue.Queue[tuple[str, tuple[Any, ...]] | None] = queue.Queue()
        self._dispatcher: threading.Thread | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self._waiters: dict[str, set[asyncio.Event]] = collections.defaultdict(set)
        self._closing = False
        self.continued: set[int] = set()
        """Experiments re-run by ``continue``: their trials no longer report to a searcher."""
        self.metrics_groups_seen: dict[tuple[int, int], set[str]] = {}
        """Per (trial id, run id), the metric groups whose rollback check already ran."""
        self._metrics_writer: MetricsWriter | None = None

    # ----------------------------------------------------------------------------------------
    # plumbing

    @contextlib.contextmanager
    def txn(self) -> Iterator[Session]:
        """Hold the lifecycle lock and a write session; run queued effects after the commit."""
        with self.lock:
            effects_before = len(self._effects)
            try:
                with self.db.write() as session:
                    yield session
            except BaseException:
                del self._effects[effects_before:]
                raise
            self._flush()

    def _flush(self) -> None:
        while self._effects:
            effect = self._effects.pop(0)
            try:
                effect()
            except Exception:
                logger.exception("master: effect failed")

    def effect(self, fn: Callable[[], None]) -> None:
        self._effects.append(fn)

    def start_dispatcher(self) -> None:
        self._dispatcher = threading.Thread(
            target=self._dispatch, name="det-master-events", daemon=True
        )
        self._dispatcher.start()

    @property
    def metrics_writer(self) -> MetricsWriter:
        """The group-commit writer of metric reports (started on first use)."""
        if self._metrics_writer is None:
            with self.lock:
                if self._metrics_writer is None:
                    self._metrics_writer = MetricsWriter(self)
        return self._metrics_writer

    def stop(self) -> None:
        if self._metrics_writer is not None:
            self._metrics_writer.close()
        self._closing = True
        self._events.put(None)
        if self._dispatcher is not None:
            self._dispatcher.join(timeout=10)
        with self.lock:
            for alloc in self.allocs.values():
                if alloc.timer is not None:
                    alloc.timer.cancel()

    def _dispatch(self) -> None:
        while True:
            item = self._events.get()
            if item is None:
                return
            name, args = item
            try:
                if name == "barrier":
                    args[0].set()
                    continue
                from determined.master._core import _events

                getattr(_events, name)(self, *args)
            except Exception:
                logger.error("master: handling %s failed:\n%s", name, traceback.format_exc())

    def wait_idle(self, timeout: float = 10.0) -> None:
        """Block until queued RM events are handled (tests and shutdown)."""
        done = threading.Event()
        self._events.put(("barrier", (done,)))
        done.wait(timeout)

    def queue_event(self, name: str, args: tuple[Any, ...]) -> None:
        """Queue an event for the dispatcher thread (handlers live in ``_events``)."""
        self._events.put((name, args))

    # ResourceManagerEvents (called from RM threads) -----------------------------------------

    def allocation_assigned(self, request: Any, assignment: Any) -> None:
        self._events.put(("assigned", (request, assignment)))

    def allocation_started(self, allocation_id: str, pid: int) -> None:
        self._events.put(("started", (allocation_id, pid)))

    def allocation_exited(
        self, allocation_id: str, exit_code: int | None, error: str | None
    ) -> None:
        self._events.put(("exited", (allocation_id, exit_code, error)))

    def allocation_log(self, allocation_id: str, lines: list[Any]) -> None:
        alloc = self.allocs.get(allocation_id)
        task_id = alloc.task_id if alloc else allocation_id.rsplit(".", 1)[0]
        rows = [
            TaskLog(
                task_id=task_id,
                allocation_id=allocation_id,
                agent_id="local",
                container_id=allocation_id,
                rank_id=line.rank_id,
                timestamp=_wire.parse_ts(line.timestamp) or utcnow(),
                level=line.level,
                log=line.message if line.message.endswith("\n") else line.message + "\n",
                source="task",
                stdtype=line.stdtype,
            )
            for line in lines
        ]
        try:
            with self.db.write() as session:
                session.add_all(rows)
        except Exception:
            logger.exception("master: storing %d log lines failed", len(rows))

    # ----------------------------------------------------------------------------------------
    # logs written by the master itself

    def master_log(
        self,
        session: Session,
        task_id: str,
        message: str,
        level: str = "LOG_LEVEL_INFO",
        allocation_id: str | None = None,
    ) -> None:
        session.add(
            TaskLog(
                task_id=task_id,
                allocation_id=allocation_id,
                agent_id="master",
                timestamp=utcnow(),
                level=level,
                log=message.rstrip("\n") + "\n",
                source="master",
                stdtype="stdout",
            )
        )

    # ----------------------------------------------------------------------------------------
    # searcher plumbing

    def searcher_of(self, exp: Experiment) -> Any:
        searcher = self.searchers.get(exp.id)
        if searcher is None:
            from determined.master.searchers import Searcher

            searcher = Searcher(exp.config)
            with self.db.read() as session:
                snap = session.get(ExperimentSnapshot, exp.id)
                if snap is not None and snap.content.get("searcher_state") is not None:
                    searcher.load_state_dict(snap.content["searcher_state"])
            self.searchers[exp.id] = searcher
        return searcher

    def searcher_event(
        self, session: Session, exp: Experiment, call: Callable[[Any], list[Any]]
    ) -> None:
        """Feed one event to the experiment's searcher and apply the actions it answers."""
        if exp.state in _wire.TERMINAL_STATES:
            return
        searcher = self.searcher_of(exp)
        try:
            actions = list(call(searcher) or [])
        except ValueError as e:
            self._searcher_failed(session, exp, str(e))
            return
        self.apply_actions(session, exp, actions)

    def _searcher_failed(self, session: Session, exp: Experiment, message: str) -> None:
        exp.error = message
        for run in self.runs(session, exp.id):
            self.master_log(session, run.task_id, f"searcher error: {message}", "LOG_LEVEL_ERROR")
        if exp.state not in _wire.TERMINAL_STATES:
            self.stop_experiment(session, exp, "STOPPING_ERROR")

    def apply_actions(self, session: Session, exp: Experiment, actions: list[Any]) -> None:
        from determined.searcher import Create, Shutdown, Stop

        searcher = self.searcher_of(exp)
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
                    pending.extend(self._searcher_stop(session, exp, action.request_id))
            except ValueError as e:
                self._searcher_failed(session, exp, str(e))
                return
        self._snapshot(session, exp)
        self.maybe_finish(session, exp)

    def _snapshot(self, session: Session, exp: Experiment) -> None:
        searcher = self.searchers.get(exp.id)
        if searcher is None:
            return
        try:
            exp.progress = float(searcher.progress())
        except Exception:
            pass
        content = {"searcher_state": searcher.state_dict()}
        snap = session.get(ExperimentSnapshot, exp.id)
        if snap is None:
            session.add(ExperimentSnapshot(experiment_id=exp.id, content=content, version=6))
        else:
            snap.content = content
            snap.updated_at = utcnow()

    # ----------------------------------------------------------------------------------------
    # experiments

    def runs(self, session: Session, exp_id: int) -> list[Run]:
        return list(
            session.scalars(select(Run).where(Run.experiment_id == exp_id).order_by(Run.id))
        )

    def create_experiment(
        self,
        session: Session,
        *,
        owner: User,
        config: dict[str, Any],
        original: str,
        model_definition: bytes | None,
        activate: bool,
        parent_id: int | None,
        project_id: int,
    ) -> Experiment:
        resources = config.get("resources") or {}
        priority = resources.get("priority")
        exp = Experiment(
            state="ACTIVE" if activate else "PAUSED",
            config=config,
            original_config=original,
            model_definition=model_definition,
            owner_id=owner.id,
            parent_id=parent_id,
            project_id=project_id or 1,
            labels=list(config.get("labels") or []),
            notes="",
            priority=int(priority) if priority is not None else 42,
            weight=float(resources.get("weight") or 1.0),
            max_slots=resources.get("max_slots"),
            progress=0.0,
        )
        session.add(exp)
        session.flush()
        exp.job_id = f"exp-{exp.id}"
        self.effect(
            lambda: self.rm.set_job_limits(
                exp.job_id, priority=exp.priority, weight=exp.weight, max_slots=exp.max_slots
            )
        )
        from determined.master.searchers import Searcher

        searcher = Searcher(config)
        self.searchers[exp.id] = searcher
        self.searcher_event(session, exp, lambda s: s.initial_trials())
        return exp

    def _create_trial(self, session: Session, exp: Experiment, action: Any) -> Run:
        searcher_cfg = exp.config.get("searcher") or {}
        warm = searcher_cfg.get("source_checkpoint_uuid")
        source_trial = searcher_cfg.get("source_trial_id")
        if not warm and source_trial:
            warm = self.latest_checkpoint_uuid(session, int(source_trial))
        run = Run(
            experiment_id=exp.id,
            request_id=action.request_id,
            task_id=f"{exp.id}.{action.request_id}",
            state="ACTIVE" if exp.state == "ACTIVE" else "PAUSED",
            hparams=action.hparams,
            seed=action.trial_seed,
            warm_start_checkpoint_uuid=warm,
            summary_metrics={},
            metadata_={},
        )
        session.add(run)
        session.flush()
        session.add(
            Task(task_id=run.task_id, task_type="TRIAL", job_id=exp.job_id, trial_id=run.id)
        )
        if exp.state == "ACTIVE":
            self.schedule(session, exp, run)
        return run

    def schedule(self, session: Session, exp: Experiment, run: Run) -> None:
        """Request a new allocation for ``run`` (run_id + 1)."""
        from determined.master.rm import AllocationRequest

        run.run_id += 1
        allocation_id = f"{run.task_id}.{run.run_id}"
        token = _auth.new_token()
        slots = int((exp.config.get("resources") or {}).get("slots_per_trial", 1))
        session.add(
            Allocation(
                allocation_id=allocation_id,
                task_id=run.task_id,
                trial_id=run.id,
                state="PENDING",
                slots=slots,
                token_hash=_auth.token_hash(token),
            )
        )
        state = AllocState(allocation_id, run.id, exp.id, run.task_id, token)
        self.allocs[allocation_id] = state
        self.trial_alloc[run.id] = allocation_id
        request = AllocationRequest(
            allocation_id=allocation_id,
            task_id=run.task_id,
            job_id=exp.job_id,
            slots=slots,
            priority=exp.priority,
            weight=exp.weight,
            max_slots=exp.max_slots,
            submitted_at=time.time(),
            resource_pool=(exp.config.get("resources") or {}).get("resource_pool") or "default",
        )
        self.master_log(
            session,
            run.task_id,
            f"Scheduling trial {run.id} (run {run.run_id}): waiting for {slots} slot(s)",
            allocation_id=allocation_id,
        )
        self.effect(lambda: self.rm.submit(request))

    def live_alloc(self, trial_id: int) -> AllocState | None:
        aid = self.trial_alloc.get(trial_id)
        alloc = self.allocs.get(aid) if aid else None
        return alloc if alloc is not None and not alloc.exited and not alloc.cancelled else None

    def request_preemption(self, session: Session, alloc: AllocState, timeout: float) -> None:
        """Raise the preemption signal of ``alloc``; kill it if it has not exited after
        ``timeout`` seconds."""
        if alloc.preempt:
            return
        alloc.preempt = True
        row = session.get(Allocation, alloc.allocation_id)
        if row is not None:
            row.preemption_requested = True
        self.effect(lambda: self.wake(alloc.allocation_id))
        aid = alloc.allocation_id

        def on_timeout() -> None:
            with self.lock:
                current = self.allocs.get(aid)
                if current is not None and not current.exited and current.launched:
                    logger.info("master: %s did not exit after preemption; killing it", aid)
                    current.preemption_timed_out = True
                    self.rm.kill(aid)

        timer = threading.Timer(timeout, on_timeout)
        timer.daemon = True
        alloc.timer = timer
        self.effect(timer.start)

    def _preemption_timeout(self, exp: Experiment) -> float:
        value = exp.config.get("preemption_timeout")
        return float(value) if value is not None else DEFAULT_PREEMPTION_TIMEOUT

    def _end_unlaunched(self, session: Session, alloc: AllocState, reason: str) -> None:
        """Forget an allocation that never launched (withdraw it from the RM queue)."""
        alloc.cancelled = True
        alloc.exited = True
        self.allocs.pop(alloc.allocation_id, None)
        row = session.get(Allocation, alloc.allocation_id)
        if row is not None:
            row.state = "TERMINATED"
            row.end_time = utcnow()
            row.exit_error = reason
        aid = alloc.allocation_id
        if alloc.assigned:
            self.effect(lambda: self.rm.release(aid))
        else:
            self.effect(lambda: self.rm.withdraw(aid))

    def set_trial_state(self, session: Session, run: Run, new_state: str) -> None:
        if run.state == new_state:
            return
        run.state = new_state
        if new_state in _wire.TERMINAL_STATES:
            run.end_time = utcnow()
        self.master_log(session, run.task_id, f"Trial {run.id} is now {new_state}")

    def stop_experiment(self, session: Session, exp: Experiment, target: str) -> None:
        """Move ``exp`` to a STOPPING_* state and stop its trials accordingly."""
        if exp.state in _wire.TERMINAL_STATES:
            return
        exp.state = target
        timeout = self._preemption_timeout(exp)
        for run in self.runs(session, exp.id):
            if run.state in _wire.TERMINAL_STATES:
                continue
            alloc = self.live_alloc(run.id)
            if alloc is not None and not alloc.launched and not alloc.assigned:
                self._end_unlaunched(session, alloc, f"experiment {target}")
                alloc = None
            if alloc is None:
                self.set_trial_state(session, run, STOP_TO_TERMINAL[target])
                continue
            self.set_trial_state(session, run, max_stopping(run.state, target))
            if target in ("STOPPING_KILLED", "STOPPING_ERROR"):
                alloc.kill_requested = True
                if alloc.launched:
                    self.effect(functools.partial(self.rm.kill, alloc.allocation_id))
            else:
                self.request_preemption(session, alloc, timeout)
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
        session.execute(
            delete(ExperimentSnapshot).where(ExperimentSnapshot.experiment_id == exp.id)
        )
        self.searchers.pop(exp.id, None)
        exp_id = exp.id
        self.effect(lambda: self._start_gc(exp_id))

    def _start_gc(self, exp_id: int) -> None:
        from determined.master._core._gc import collect_experiment

        threading.Thread(
            target=collect_experiment, args=(self.db, exp_id), name=f"det-gc-{exp_id}", daemon=True
        ).start()

    # user actions --------------------------------------------------------------------------

    def pause(self, session: Session, exp: Experiment) -> None:
        if exp.state == "PAUSED":
            return
        if exp.state != "ACTIVE":
            raise _wire.APIError(400, f"experiment {exp.id} is {exp.state}; only ACTIVE can pause")
        exp.state = "PAUSED"
        timeout = self._preemption_timeout(exp)
        for run in self.runs(session, exp.id):
            if run.state != "ACTIVE":
                continue
            alloc = self.live_alloc(run.id)
            if alloc is not None and not alloc.assigned:
                self._end_unlaunched(session, alloc, "experiment paused")
            elif alloc is not None:
                self.request_preemption(session, alloc, timeout)
            self.set_trial_state(session, run, "PAUSED")

    def activate(self, session: Session, exp: Experiment) -> None:
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
            if self.live_alloc(run.id) is None:
                self.schedule(session, exp, run)

    def kill_trial(self, session: Session, exp: Experiment, run: Run) -> None:
        if run.state in _wire.TERMINAL_STATES:
            return
        alloc = self.live_alloc(run.id)
        if alloc is not None and not alloc.assigned:
            self._end_unlaunched(session, alloc, "trial killed")
            alloc = None
        if alloc is None:
            self.set_trial_state(session, run, "CANCELED")
            self.searcher_event(
                session,
                exp,
                lambda s: s.trial_exited_early(run.request_id, _reason("USER_CANCELED")),
            )
            self.maybe_finish(session, exp)
            return
        self.set_trial_state(session, run, "STOPPING_KILLED")
        alloc.kill_requested = True
        if alloc.launched:
            aid = alloc.allocation_id
            self.effect(lambda: self.rm.kill(aid))

    def _searcher_stop(self, session: Session, exp: Experiment, request_id: str) -> list[Any]:
        run = session.scalar(
            select(Run).where(Run.experiment_id == exp.id, Run.request_id == request_id)
        )
        if run is None or run.state in _wire.TERMINAL_STATES:
            return []
        run.early_stopped_by_searcher = True
        alloc = self.live_alloc(run.id)
        if alloc is not None and not alloc.assigned:
            self._end_unlaunched(session, alloc, "stopped by the searcher")
            alloc = None
        if alloc is None:
            self.set_trial_state(session, run, "COMPLETED")
            return list(self.searcher_of(exp).trial_exited(request_id))
        self.set_trial_state(session, run, "STOPPING_COMPLETED")
        self.master_log(
            session, run.task_id, "the searcher stopped this trial; asking it to preempt"
        )
        self.request_preemption(session, alloc, self._preemption_timeout(exp))
        return []

    def trial_exited(
        self, session: Session, exp: Experiment, run: Run, alloc: AllocState | None, failed: bool
    ) -> None:
        """Decide what comes after an allocation of ``run`` ended (upstream's
        ``handleAllocationExit``)."""
        acked = alloc.acked if alloc else False
        request_id = run.request_id
        if run.state in STOP_TO_TERMINAL:
            terminal = STOP_TO_TERMINAL[run.state]
            if failed and run.state == "STOPPING_COMPLETED" and not acked:
                terminal = "ERROR"
            self.set_trial_state(session, run, terminal)
            self._notify_exit(session, exp, run, terminal)
        elif failed:
            run.restarts += 1
            max_restarts = int(exp.config.get("max_restarts", 5))
            if run.restarts > max_restarts:
                self.master_log(
                    session,
                    run.task_id,
                    f"Trial {run.id} exceeded max restarts ({max_restarts})",
                    "LOG_LEVEL_ERROR",
                )
                self.set_trial_state(session, run, "ERROR")
                self._notify_exit(session, exp, run, "ERROR")
            elif exp.state == "ACTIVE" and run.state == "ACTIVE":
                self.master_log(
                    session,
                    run.task_id,
                    f"Restarting trial {run.id} ({run.restarts}/{max_restarts} restarts)",
                )
                self.schedule(session, exp, run)
            else:
                self.set_trial_state(session, run, "PAUSED")
        elif not acked:
            self.set_trial_state(session, run, "COMPLETED")
            self._notify_exit(session, exp, run, "COMPLETED")
        elif exp.state == "ACTIVE" and run.state == "ACTIVE":
            self.schedule(session, exp, run)
        else:
            self.set_trial_state(session, run, "PAUSED")
        del request_id
        self.maybe_finish(session, exp)

    def _notify_exit(self, session: Session, exp: Experiment, run: Run, terminal: str) -> None:
        if exp.state in _wire.TERMINAL_STATES:
            return
        if exp.id in self.continued:
            runs = self.runs(session, exp.id)
            if exp.state == "ACTIVE" and all(r.state in _wire.TERMINAL_STATES for r in runs):
                failed = any(r.state == "ERROR" for r in runs)
                exp.state = "STOPPING_ERROR" if failed else "STOPPING_COMPLETED"
                self.continued.discard(exp.id)
            return
        rid = run.request_id
        reason = None
        if run.early_exit_reason:
            reason = _reason(run.early_exit_reason)
        elif terminal == "ERROR":
            reason = _reason("ERRORED")
        elif terminal == "CANCELED" and not exp.state.startswith("STOPPING"):
            reason = _reason("USER_CANCELED")
        if reason is not None:
            # Upstream reports the early exit first, then closes the trial.
            self.searcher_event(session, exp, lambda s: s.trial_exited_early(rid, reason))
        self.searcher_event(session, exp, lambda s: s.trial_exited(rid))

    # checkpoints -----------------------------------------------------------------------------

    def latest_checkpoint(self, session: Session, run: Run) -> tuple[str, int] | None:
        """The uuid and steps_completed of the checkpoint ``run`` resumes from."""
        ckpt = session.scalar(
            select(Checkpoint)
            .where(Checkpoint.trial_id == run.id, Checkpoint.state == "COMPLETED")
            .order_by(Checkpoint.report_time.desc(), Checkpoint.id.desc())
            .limit(1)
        )
        if ckpt is not None:
            return ckpt.uuid, int(ckpt.steps_completed or 0)
        if run.warm_start_checkpoint_uuid:
            return run.warm_start_checkpoint_uuid, 0
        return None

    def latest_checkpoint_uuid(self, session: Session, trial_id: int) -> str | None:
        ckpt = session.scalar(
            select(Checkpoint)
            .where(Checkpoint.trial_id == trial_id, Checkpoint.state == "COMPLETED")
            .order_by(Checkpoint.report_time.desc(), Checkpoint.id.desc())
            .limit(1)
        )
        return ckpt.uuid if ckpt else None

    # preemption long-poll ------------------------------------------------------------------

    def wake(self, allocation_id: str) -> None:
        loop = self.loop
        waiters = list(self._waiters.get(allocation_id, ()))
        if loop is None:
            return
        for event in waiters:
            loop.call_soon_threadsafe(event.set)

    async def wait_preemption(self, allocation_id: str, timeout: float) -> bool:
        alloc = self.allocs.get(allocation_id)
        if alloc is None:
            return False
        if alloc.preempt or timeout <= 0:
            return alloc.preempt
        event = asyncio.Event()
        self._waiters[allocation_id].add(event)
        try:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(event.wait(), timeout)
        finally:
            self._waiters[allocation_id].discard(event)
            if not self._waiters[allocation_id]:
                self._waiters.pop(allocation_id, None)
        current = self.allocs.get(allocation_id)
        return bool(current and current.preempt)

    def recover(self) -> None:
        """Resume every non-terminal experiment after a (re)start of the master."""
        from determined.master._core._recovery import recover

        recover(self)


def max_stopping(current: str, target: str) -> str:
    """Stopping states only degrade: COMPLETED < CANCELED < KILLED < ERROR."""
    order = ["STOPPING_COMPLETED", "STOPPING_CANCELED", "STOPPING_KILLED", "STOPPING_ERROR"]
    if current in order and order.index(current) > order.index(target):
        return current
    return target


def _reason(name: str) -> Any:
    from determined.searcher import ExitedReason

    name = name.removeprefix("EXITED_REASON_")
    return ExitedReason[name]
