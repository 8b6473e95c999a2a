"""Resource-manager events: what an RM tells the master, handled on one dispatcher thread.

The resource managers call :class:`AllocationEvents` (their ``ResourceManagerEvents``) from their
own threads, possibly while holding their own locks; each call is queued and handled in order on
the ``det-master-events`` thread. ``assigned`` prepares the work directory, ClusterInfo and
environment and launches the process (``_trial_launches``); ``started`` records its pid;
``exited`` decides what comes next for the trial; log lines are stored at once. Events of one kind
queued together are handled together (one transaction for several trials' starts, exits or
launches), each allocation's events still in order.
"""

from __future__ import annotations

import collections
import logging
import queue
import threading
import time
import traceback
from collections.abc import Sequence
from typing import Any

import sqlalchemy
from sqlalchemy import bindparam, text, update
from sqlalchemy.orm import Session

from determined.master._core._allocations import Allocations
from determined.master._core._db_errors import unavailable
from determined.master._core._experiments import load_trials
from determined.master._core._task_logs import store_task_lines
from determined.master._core._transactions import Transactions
from determined.master._core._trial_exits import TrialExits
from determined.master._core._trial_launches import TrialLaunches
from determined.master._core._work_dirs import WorkDirs
from determined.master.db import (
    Allocation,
    utcnow,
)

logger = logging.getLogger("determined.master")

_Event = tuple[str, tuple[Any, ...]] | None
"""A queued event: (handler name, arguments), or None to stop the dispatcher."""


_DB_FRESH_S = 1.0
"""A database that answered a statement this recently, with no error since, is not probed before an
event (a healthy, busy master pays nothing; an idle one probes once per event)."""


class AllocationEvents:
    """The master's ``ResourceManagerEvents``: queues RM calls and handles them on one thread."""

    def __init__(
        self,
        transactions: Transactions,
        allocations: Allocations,
        trial_exits: TrialExits,
        rm: Any,
        work_dirs: WorkDirs,
        cluster_id: str,
    ) -> None:
        self._transactions = transactions
        self._db = transactions.db
        self._allocations = allocations
        self._trial_exits = trial_exits
        self._work_dirs = work_dirs
        self.master_url = ""
        """The URL trials reach the master on (known once the HTTP socket is bound)."""
        self._queue: queue.Queue[_Event] = queue.Queue()
        self._held: collections.deque[_Event] = collections.deque()
        """Events taken from the queue to look past them (:meth:`_take_queued`), handled first."""
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._db_seen_at = 0.0
        self._db_failed = True
        sqlalchemy.event.listen(self._db.engine, "after_cursor_execute", self._db_answered)
        sqlalchemy.event.listen(self._db.engine, "handle_error", self._db_erred)
        self.launches = TrialLaunches(
            transactions,
            allocations,
            rm,
            self._queue,
            work_dirs,
            cluster_id,
            lambda: self.master_url,
        )
        self.proxy_ports = self.launches.proxy_ports
        """The ``environment.proxy_ports`` services of launched trials (``/proxy/<task>:<port>/``)."""
        self.tasks: Any = None
        """The tasks service (commands, notebooks, ...): the events of its allocations go there."""
        self.shutting_down = False
        """Set when the master begins a graceful stop: a trial that fails from then on (its master is
        going away) is left to start-up recovery, exactly as after a crash, instead of being failed."""

    # ResourceManagerEvents (called from RM threads) -------------------------------------------

    def allocation_assigned(self, request: Any, assignment: Any) -> None:
        self._queue.put(("_assigned", (request, assignment)))

    def allocation_started(self, allocation_id: str, pid: int) -> None:
        self._queue.put(("_started", (allocation_id, pid)))

    def allocation_exited(
        self, allocation_id: str, exit_code: int | None, error: str | None
    ) -> None:
        self._queue.put(("_exited", (allocation_id, exit_code, error)))

    def allocation_log(self, allocation_id: str, lines: list[Any]) -> None:
        store_task_lines(
            self._db, self._allocations.task_id_of(allocation_id), allocation_id, lines
        )

    # the dispatcher thread --------------------------------------------------------------------

    def start(self) -> None:
        """Start handling queued events."""
        self._thread = threading.Thread(
            target=self._dispatch, name="det-master-events", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Handle what is queued, then stop the dispatcher thread."""
        self._stopping.set()
        self._queue.put(None)
        if self._thread is not None:
            self._thread.join(timeout=10)

    def wait_idle(self, timeout: float = 10.0) -> None:
        """Block until the events queued so far are handled (tests and shutdown)."""
        done = threading.Event()
        self._queue.put(("_barrier", (done,)))
        done.wait(timeout)

    def _dispatch(self) -> None:
        while True:
            item = self._held.popleft() if self._held else self._queue.get()
            if item is None:
                return
            name, args = item
            if name != "_barrier":
                self._wait_for_database()
            try:
                if name == "_assigned":
                    self._assigned_all([args, *self._take_queued("_assigned")])
                elif name == "_started":
                    self._started_all([args, *self._take_queued("_started")])
                elif name == "_exited":
                    self._exited_all([args, *self._take_queued("_exited")])
                else:
                    getattr(self, name)(*args)
            except Exception:
                logger.error("master: handling %s failed:\n%s", name, traceback.format_exc())

    def _take_queued(self, name: str) -> list[tuple[Any, ...]]:
        """Take the queued events called ``name`` out of turn (see :func:`_take_out_of_turn`)."""
        taken, self._held = _take_out_of_turn(self._queue, self._held, name)
        return taken

    def _wait_for_database(self) -> None:
        """Hold events while the database is unreachable (a PostgreSQL restart): an allocation's
        exit handled then would fail half-way and be lost; handled once it is back, nothing is.
        Gives up when the master stops (start-up recovery then sees the allocation still open)."""
        if not self._db_failed and time.monotonic() - self._db_seen_at < _DB_FRESH_S:
            return  # it answered a moment ago and nothing has failed since: no probe needed
        delay = 0.1
        warned = False
        while True:
            try:
                self._db_failed = False
                with self._db.read() as session:
                    session.execute(text("SELECT 1"))
            except Exception as exc:
                if unavailable(exc) is None or self._stopping.is_set():
                    return  # not an outage (the handler will report it), or shutting down
                if not warned:
                    logger.warning(
                        "master: the database is unavailable (%s); holding resource-manager"
                        " events until it is back",
                        str(exc).splitlines()[0],
                    )
                    warned = True
                self._stopping.wait(delay)
                delay = min(delay * 2, 2.0)
                continue
            if warned:
                logger.warning("master: the database is back; handling held events")
            return

    def _db_answered(self, *_: Any) -> None:
        self._db_seen_at = time.monotonic()

    def _db_erred(self, _context: Any) -> None:
        self._db_failed = True  # any error: the next event probes before it is handled

    def _barrier(self, done: threading.Event) -> None:
        done.set()

    # handlers ---------------------------------------------------------------------------------

    def _assigned_all(self, assignments: list[tuple[Any, ...]]) -> None:
        """Launch assigned allocations: tasks' by the tasks service, trials' together
        (:class:`TrialLaunches`)."""
        trials = []
        for request, assignment in assignments:
            if self.tasks is not None and self.tasks.owns(request.allocation_id):
                self.tasks.assigned(request, assignment)
            else:
                trials.append((request, assignment))
        if trials:
            self.launches.assigned(trials)

    def _started_all(self, started: list[tuple[Any, ...]]) -> None:
        """Record that allocations' processes started (their pids): trials' in one statement."""
        rows = []
        for allocation_id, pid in started:
            if self.tasks is not None and self.tasks.owns(allocation_id):
                self.tasks.started(allocation_id, pid)
            else:
                rows.append({"aid": allocation_id, "new_pid": pid, "started": utcnow()})
        if rows:
            with self._db.write() as session:
                session.connection().execute(_SET_ALLOCATION_RUNNING, rows)

    def _exited_all(self, exits: list[tuple[Any, ...]]) -> None:
        """Handle allocations' exits: trials' together in one lifecycle transaction (a busy master
        finds several queued at once; see :meth:`Transactions.batch` for a failed batch)."""
        trials = [args for args in exits if self._trial_exit(*args)]
        loaded: list[Any] = []

        def load(session: Session, batch: Sequence[tuple[Any, ...]]) -> None:
            ids = (self._allocations.trial_of(args[0]) for args in batch)
            loaded.extend(load_trials(session, [t for t in ids if t is not None]))

        self._transactions.batch(
            trials, lambda session, args: self._trial_exited(session, *args), load
        )
        # handled: nothing runs or reads there any more
        self._work_dirs.discard(allocation_id for allocation_id, *_ in exits)

    def _trial_exit(self, allocation_id: str, exit_code: int | None, error: str | None) -> bool:
        """Whether this exit is a trial's to handle in a lifecycle transaction (else it is handled
        here: a task's, or a failure while the master stops)."""
        if self.tasks is not None and self.tasks.owns(allocation_id):
            self.tasks.exited(allocation_id, exit_code, error)
            return False
        self.proxy_ports.unregister(allocation_id)
        self.launches.port_waits.discard(allocation_id)
        if self.shutting_down and (error is not None or exit_code != 0):
            # Its allocation stays open: the next master's recovery resumes the trial from its
            # latest checkpoint, as it does after a SIGKILL. A clean exit is still recorded.
            logger.info(
                "master: allocation %s exited (%s) while the master stops; left to recovery",
                allocation_id,
                error or f"code {exit_code}",
            )
            return False
        return True

    def _trial_exited(
        self, session: Session, allocation_id: str, exit_code: int | None, error: str | None
    ) -> None:
        """Record a trial's allocation exit and move the trial on, in the open transaction."""
        alloc = self._allocations.mark_exited(session, allocation_id, exit_code, error)
        if alloc is not None:
            self._trial_exits.allocation_exited(session, alloc, exit_code, error)


_SET_ALLOCATION_RUNNING = (
    update(Allocation)
    .where(Allocation.allocation_id == bindparam("aid"))
    .values(state="RUNNING", pid=bindparam("new_pid"), start_time=bindparam("started"))
)
"""Core, built once, and the rows are not loaded: none of these columns is one the
authentication cache watches (see ``_deps.AuthCache``)."""


def _take_out_of_turn(
    events: queue.Queue[_Event], held: collections.deque[_Event], name: str
) -> tuple[list[tuple[Any, ...]], collections.deque[_Event]]:
    """The arguments of the queued events called ``name``, to handle with the one in hand, and the
    events left (``held`` with what was queued after it, in order).

    Only events of allocations with nothing queued before them are taken, so each allocation's
    events keep their order; other allocations' events are independent of them. A busy master
    finds several starts, exits or launches queued together: one transaction handles them all."""
    while True:
        try:
            item = events.get_nowait()
        except queue.Empty:
            break
        held.append(item)
        if item is None:
            break
    taken: list[tuple[Any, ...]] = []
    kept: collections.deque[_Event] = collections.deque()
    earlier: set[str] = set()
    for item in held:
        if item is not None and item[0] == name and item[1][0] not in earlier:
            taken.append(item[1])
            continue
        kept.append(item)
        if item is not None and item[0] != "_barrier":
            args = item[1]
            earlier.add(args[0].allocation_id if item[0] == "_assigned" else args[0])
    return taken, kept
