"""The allocations service: running allocations, their preemption signals, kills and exits.

An allocation is one attempt to run a trial (upstream's ``allocation``): requested from the resource
manager, assigned slots, launched, exited. This service keeps what the master knows in memory about
the live ones (:class:`AllocState`), raises and serves their preemption long-poll, and turns the
resource manager's calls into effects of the current lifecycle transaction.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import logging
import time
from typing import Any

from sqlalchemy import bindparam, insert, update
from sqlalchemy.orm import Session

from determined.master import _auth
from determined.master._core._deadlines import Deadline, Deadlines
from determined.master._core._held_rows import write_at_commit
from determined.master._core._owner_sessions import OwnerSessions
from determined.master._core._task_logs import master_log
from determined.master._core._transactions import Transactions
from determined.master._wire import APIError
from determined.master.db import Allocation, Experiment, Run, note_revoked, utcnow

logger = logging.getLogger("determined.master")


@dataclasses.dataclass
class AllocState:
    """What the master keeps in memory about one live allocation."""

    allocation_id: str
    trial_id: int
    experiment_id: int
    task_id: str
    token: str
    user_token: str = ""
    """A session of the experiment's owner for the trial's SDK calls (``DET_USER_TOKEN``, see
    ``_owner_sessions``); the allocation token itself only reaches its own trial."""
    request_id: str = ""
    """The trial's searcher request id (its searcher state knows the trial by it)."""
    owner_id: int = 0
    """The experiment's owner, whose rights the trial acts with (its allocation token's user)."""
    preempt: bool = False
    acked: bool = False
    assigned: bool = False
    launched: bool = False
    cancelled: bool = False
    kill_requested: bool = False
    preemption_timed_out: bool = False
    evicted: bool = False
    """Killed because its agent or slot was disabled: its exit reschedules the trial, uncounted."""
    exited: bool = False
    timer: Deadline | None = None
    """Its preemption timeout, once the preemption is committed."""

    def preempted_by_kill(self, failed: bool) -> str | None:
        """Why the master killed this allocation as a preemption rather than a crash (it ignored
        its preemption signal, or its agent or slot was disabled), for its exit; else None."""
        if self.preemption_timed_out:
            return "killed after the preemption timeout"
        if self.evicted and failed:
            return "killed: its agent or slot was disabled"
        return None


class Allocations:
    """Live allocations of one master and the signals that reach them.

    Methods taking a ``session`` run inside a lifecycle transaction of ``transactions`` (the caller
    holds it); resource-manager calls they make are effects of that transaction.
    """

    def __init__(self, transactions: Transactions, rm: Any) -> None:
        self._transactions = transactions
        self._rm = rm
        self.owner_sessions = OwnerSessions(transactions)
        """The owner's session of each live experiment's trials (``DET_USER_TOKEN``)."""
        self._by_id: dict[str, AllocState] = {}
        self._by_token: dict[str, AllocState] = {}
        """The same allocations by their allocation token (a trial's requests carry it)."""
        self._of_trial: dict[int, str] = {}
        self._waiters: dict[str, set[asyncio.Event]] = collections.defaultdict(set)
        self._long_polls_ended = False
        self.loop: asyncio.AbstractEventLoop | None = None
        """The HTTP server's event loop (preemption long-polls wait on it)."""
        self._deadlines = Deadlines()
        """The preemption timeouts (one thread for all of them)."""

    # ------------------------------------------------------------------------------------------
    # lookups

    def get(self, allocation_id: str) -> AllocState | None:
        """The in-memory state of an allocation this master started (None once it exited)."""
        return self._by_id.get(allocation_id)

    def of_token(self, token: str) -> AllocState | None:
        """The live allocation whose allocation token is ``token``, if any: authenticates a
        trial's requests without a database read (``_api._deps``)."""
        return self._by_token.get(token)  # kept beside ``_by_id`` by ``_add`` and ``_remove``

    def live(self, trial_id: int) -> AllocState | None:
        """The trial's allocation that has not exited or been cancelled, if any."""
        aid = self._of_trial.get(trial_id)
        alloc = self._by_id.get(aid) if aid else None
        return alloc if alloc is not None and not alloc.exited and not alloc.cancelled else None

    def trial_of(self, allocation_id: str) -> int | None:
        """The trial a live allocation runs (None when it is unknown or gone)."""
        alloc = self._by_id.get(allocation_id)
        return alloc.trial_id if alloc is not None else None

    def task_id_of(self, allocation_id: str) -> str:
        """The task of an allocation (derived from its id once the allocation is gone)."""
        alloc = self._by_id.get(allocation_id)
        return alloc.task_id if alloc else allocation_id.rsplit(".", 1)[0]

    # ------------------------------------------------------------------------------------------
    # inside a lifecycle transaction

    def request(
        self, session: Session, exp: Experiment, run: Run, *, numbered: bool = False
    ) -> AllocState:
        """Request a new allocation for ``run`` (its run id goes up by one; ``numbered``: the
        caller already counted it, as a new trial's row is inserted with run id 1)."""
        from determined.master.rm import AllocationRequest

        if not numbered:
            run.run_id += 1
        allocation_id = f"{run.task_id}.{run.run_id}"
        token = _auth.new_token()
        resources = exp.config.get("resources") or {}
        slots = int(resources.get("slots_per_trial", 1))
        # Core INSERTs, not ORM objects: nothing reads these rows back in the transaction, and the
        # unit of work's flush of them was a good part of a new trial's cost.
        connection = session.connection()
        connection.execute(
            _INSERT_ALLOCATION,
            {
                "allocation_id": allocation_id,
                "task_id": run.task_id,
                "trial_id": run.id,
                "state": "PENDING",
                "slots": slots,
                "token_hash": _auth.token_hash(token),
            },
        )
        user_token = self.owner_sessions.token(session, exp)
        alloc = AllocState(
            allocation_id,
            run.id,
            exp.id,
            run.task_id,
            token,
            user_token,
            run.request_id,
            owner_id=exp.owner_id,
        )
        previous = self._of_trial.get(run.id)
        self._add(alloc)
        self._of_trial[run.id] = allocation_id
        self._transactions.undo(lambda: self._unrequest(alloc, previous))
        request = AllocationRequest(
            allocation_id=allocation_id,
            task_id=run.task_id,
            job_id=exp.job_id,
            slots=slots,
            priority=exp.priority,
            weight=exp.weight,
            max_slots=exp.max_slots,
            submitted_at=time.time(),
            resource_pool=resources.get("resource_pool") or "default",
            options={"slurm": dict(exp.config.get("slurm") or {})},
        )
        master_log(
            session,
            run.task_id,
            f"Scheduling trial {run.id} (run {run.run_id}): waiting for {slots} slot(s)",
            allocation_id=allocation_id,
        )
        self._transactions.effect(lambda: self._rm.submit(request))
        return alloc

    def _unrequest(self, alloc: AllocState, previous: str | None) -> None:
        """Undo :meth:`request` after its transaction failed: the RM never heard of it."""
        self._remove(alloc.allocation_id)
        if previous is None:
            self._of_trial.pop(alloc.trial_id, None)
        else:
            self._of_trial[alloc.trial_id] = previous

    def request_preemption(self, alloc: AllocState, timeout: float) -> None:
        """Raise the preemption signal of ``alloc``; kill it if it has not exited after
        ``timeout`` seconds. The signal lives in memory (the long-poll answers from it); its row
        records it with the exit (:meth:`mark_exited`): nothing reads it before, and recovery
        closes a live allocation's row whatever it says."""
        if alloc.preempt:
            return
        alloc.preempt = True
        aid = alloc.allocation_id
        self._transactions.effect(lambda: self.wake(aid))

        def on_timeout() -> None:
            with self._transactions.lock:
                current = self._by_id.get(aid)
                if current is not None and not current.exited and current.launched:
                    logger.info("master: %s did not exit after preemption; killing it", aid)
                    current.preemption_timed_out = True
                    self._rm.kill(aid)

        def start_timeout() -> None:
            alloc.timer = self._deadlines.later(timeout, on_timeout)

        self._transactions.effect(start_timeout)

    def end_unlaunched(self, session: Session, alloc: AllocState, reason: str) -> None:
        """Forget an allocation that never launched (withdraw it from the RM queue)."""
        alloc.cancelled = True
        alloc.exited = True
        self._remove(alloc.allocation_id)
        row = session.get(Allocation, alloc.allocation_id)
        if row is not None:
            row.state = "TERMINATED"
            row.end_time = utcnow()
            row.exit_error = reason
        aid = alloc.allocation_id
        if alloc.assigned:
            self._transactions.effect(lambda: self._rm.release(aid))
        else:
            self._transactions.effect(lambda: self._rm.withdraw(aid))

    def kill(self, alloc: AllocState) -> None:
        """Kill ``alloc``'s processes (at launch if it has not launched yet)."""
        alloc.kill_requested = True
        if alloc.launched:
            aid = alloc.allocation_id
            self._transactions.effect(lambda: self._rm.kill(aid))

    def evict(self, alloc: AllocState) -> None:
        """Kill ``alloc`` because the agent or slot it runs on was disabled (upstream's force
        kill): its exit is a preemption, not a crash, so the trial is scheduled again."""
        alloc.evicted = True
        self.kill(alloc)

    def mark_exited(
        self, session: Session, allocation_id: str, exit_code: int | None, error: str | None
    ) -> AllocState | None:
        """Record that an allocation's process ended and release its slots.

        Returns its state, or None when it was not live (already handled or never ours).
        """
        alloc = self._remove(allocation_id)
        self._transactions.effect(lambda: self._rm.release(allocation_id))
        if alloc is None or alloc.exited:
            return None
        alloc.exited = True
        self._transactions.undo(lambda: self._unexit(alloc))
        if alloc.timer is not None:
            alloc.timer.cancel()
        self._transactions.effect(lambda: self.wake(allocation_id))
        exited = {
            "aid": allocation_id,
            "now": utcnow(),
            "code": exit_code,
            "error": error,
            "preempted": alloc.preempt,
        }
        write_at_commit(session, _ALLOCATION_EXITED, exited)  # with the batch's other exits
        # no row was loaded, so no flush tells the authentication cache: the note does
        note_revoked(session, allocation_ids=[allocation_id])
        return alloc

    def _unexit(self, alloc: AllocState) -> None:
        """Undo :meth:`mark_exited` after its transaction failed: the exit can be handled again
        (its preemption timeout, cancelled, is not needed: the process has ended)."""
        alloc.exited = False
        self._add(alloc)

    def _add(self, alloc: AllocState) -> None:
        self._by_id[alloc.allocation_id] = alloc
        self._by_token[alloc.token] = alloc

    def _remove(self, allocation_id: str) -> AllocState | None:
        alloc = self._by_id.pop(allocation_id, None)
        if alloc is not None:
            self._by_token.pop(alloc.token, None)
        return alloc

    # ------------------------------------------------------------------------------------------
    # requests of the trial itself (each in its own transaction)

    def ack_preemption(self, allocation_id: str) -> None:
        """The trial saw its preemption signal and will exit: its exit is a pause, not the end."""
        with self._transactions.txn() as session:
            row = session.get(Allocation, allocation_id)
            if row is None:
                raise APIError(404, f"allocation {allocation_id} not found")
            row.preemption_acked = True
            alloc = self._by_id.get(allocation_id)
            if alloc is not None:
                alloc.acked = True

    def wake(self, allocation_id: str) -> None:
        """Answer the allocation's pending preemption long-polls now."""
        loop = self.loop
        waiters = list(self._waiters.get(allocation_id, ()))
        if loop is None:
            return
        for event in waiters:
            loop.call_soon_threadsafe(event.set)

    def end_long_polls(self) -> None:
        """The master is stopping: answer every pending preemption long-poll, and the ones that
        come from now on, at once."""
        self._long_polls_ended = True
        with contextlib.suppress(RuntimeError):  # the loop already closed: no poll is pending
            for allocation_id in list(self._waiters):
                self.wake(allocation_id)

    async def wait_preemption(self, allocation_id: str, timeout: float) -> bool:
        """Whether the allocation should stop, waiting up to ``timeout`` seconds for the signal."""
        alloc = self._by_id.get(allocation_id)
        if alloc is None:
            return False
        if alloc.preempt or timeout <= 0 or self._long_polls_ended:
            return alloc.preempt
        event = asyncio.Event()
        self._waiters[allocation_id].add(event)
        if self._long_polls_ended:  # ended between the check above and now
            event.set()
        try:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(event.wait(), timeout)
        finally:
            self._waiters[allocation_id].discard(event)
            if not self._waiters[allocation_id]:
                self._waiters.pop(allocation_id, None)
        current = self._by_id.get(allocation_id)
        return bool(current and current.preempt)

    def close(self) -> None:
        """Cancel every pending preemption timeout (master shutdown)."""
        self._deadlines.stop()


_INSERT_ALLOCATION = insert(Allocation)
"""A new allocation's row (built once; see :meth:`Allocations.request`)."""
_ALLOCATION_EXITED = (
    update(Allocation)
    .where(Allocation.allocation_id == bindparam("aid"))
    .values(
        state="TERMINATED",
        end_time=bindparam("now"),
        exit_code=bindparam("code"),
        exit_error=bindparam("error"),
        preemption_requested=bindparam("preempted"),
    )
)
"""Allocation rows written without loading them first (a SELECT per trial), built once, run at the
commit by ``_held_rows.write_at_commit`` with the transaction's other exits. The authentication
cache does not see such a write in a flush; :meth:`Allocations.mark_exited` notes the exit's revocation
(``db.note_revoked``) for it."""
