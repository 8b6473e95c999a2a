"""The base class of resource managers that schedule on a thread of their own.

:class:`ThreadedResourceManager` owns what every such resource manager shares: the queue (one
:class:`PriorityScheduler` per resource pool), the scheduling thread woken by a condition on every
change (never polling, unless a subclass asks for a periodic look at a changing cluster), the
bookkeeping of assignments, the validation of requests, signal delivery (``terminate``/``kill``),
``release``/``withdraw`` and an orderly ``close``. A subclass says only *where* allocations run.

What a subclass implements (every ``*_locked`` method is called with ``self._cond`` held and must
not block):

- ``__init__``: call ``super().__init__(kind)``; put a :class:`PriorityScheduler` per pool into
  ``self._schedulers`` (here or in ``_connect``/``_refresh``) and set ``self._slot_type``.
- :meth:`_on_start_locked` (required): the scheduler started a request; record what is needed and
  return the work to do outside the lock (assign at once, or reserve resources first and call
  :meth:`_assigned_locked` and ``_notify("allocation_assigned", ...)`` once they are held).
- :meth:`_launch_locked` (required): run the processes of an assigned allocation; report
  ``allocation_started``/``allocation_log``/``allocation_exited`` through :meth:`_notify` from
  other threads; return an event set once ``allocation_exited`` was delivered.
- :meth:`_signal_locked` (required): deliver a signal to a launched allocation's processes.
- :meth:`_free_locked` (required): the allocation was released: kill what still runs and give back
  whatever was reserved for it.
- :meth:`_refusal` (required): why a request can never fit a pool (or the pool is unknown).
- :meth:`_is_launched_locked` (required): whether an allocation's processes were launched.
- :meth:`_check_request`, :meth:`_connect`, :meth:`_refresh`, :meth:`_idle_timeout_locked` and
  :attr:`waits_for_capacity` (optional, with defaults below); ``close`` (extend it to give back
  what the RM holds: connections, reservations).
- ``describe`` and ``reap_orphan`` of :class:`ResourceManager`.

A new resource manager shows it conforms by passing
``determined.master.testing.rm_suite.ResourceManagerSuite``.
"""

from __future__ import annotations

import abc
import logging
import signal
import threading
import time
from collections.abc import Callable, Collection
from typing import Any

from determined.master.rm._base import ResourceManager
from determined.master.rm._scheduler import PriorityScheduler, Start
from determined.master.rm._types import (
    UNSET,
    AllocationRequest,
    Assignment,
    LaunchSpec,
    ResourceManagerEvents,
    Unset,
)

logger = logging.getLogger("determined.master.rm")

DEFAULT_POOL = "default"


class ThreadedResourceManager(ResourceManager):
    """Queue, scheduling thread, signals and shutdown shared by the thread-based RMs.

    Args:
        kind: a short name for thread names and log messages (``"local"``, ``"ray"``, ...).
    """

    waits_for_capacity = False
    """True when a request larger than its pool is now waits (the cluster may grow) instead of
    being refused at ``submit``; ``validate`` still refuses what can never fit."""

    def __init__(self, kind: str) -> None:
        self._kind = kind
        self._cond = threading.Condition()
        self._dirty = True
        self._closed = False
        self._events: ResourceManagerEvents | None = None
        self._thread: threading.Thread | None = None
        self._schedulers: dict[str, PriorityScheduler] = {}
        self._pool_of: dict[str, str] = {}
        self._assigned: dict[str, Assignment] = {}
        self._launched: list[threading.Event] = []
        self._slot_type = "cpu"
        self._disabled: dict[str, tuple[frozenset[int], bool]] = {}
        """Per pool: the disabled slots and whether the whole node is (see ``set_disabled``)."""

    # -------------------------------------------------------------------------------------------
    # what subclasses implement

    @abc.abstractmethod
    def _on_start_locked(self, pool: str, start: Start) -> Callable[[], None]:
        """The scheduler started ``start.request`` in ``pool``; the work to run outside the lock."""

    @abc.abstractmethod
    def _launch_locked(self, spec: LaunchSpec, assignment: Assignment) -> threading.Event:
        """Run an assigned allocation; an event set once its ``allocation_exited`` was delivered."""

    @abc.abstractmethod
    def _signal_locked(self, allocation_id: str, signum: int) -> None:
        """Deliver ``signum`` to every process of the launched allocation (no-op once gone)."""

    @abc.abstractmethod
    def _free_locked(self, allocation_id: str) -> None:
        """The allocation was released: kill what runs, give back what was reserved for it."""

    @abc.abstractmethod
    def _refusal(self, slots: int, resource_pool: str) -> str | None:
        """Why ``slots`` (an int >= 0) in ``resource_pool`` can never start here, else None."""

    @abc.abstractmethod
    def _is_launched_locked(self, allocation_id: str) -> bool:
        """Whether ``launch`` was called for the allocation (and it was not released since)."""

    def _check_request(self, request: AllocationRequest) -> None:
        """Raise ValueError for a request refused whatever the queue holds (default: unknown
        pools)."""
        if request.resource_pool not in self._schedulers:
            raise ValueError(f"resource_pool: no pool {request.resource_pool!r}")

    def _connect(self) -> None:
        """Called by ``start`` before the scheduling thread runs (outside the lock)."""

    def _refresh(self) -> None:
        """Called outside the lock before every scheduling pass (e.g. re-read the cluster)."""

    def _idle_timeout_locked(self) -> float | None:
        """How long the idle scheduling thread waits before a pass on its own; None: forever."""
        return None

    # -------------------------------------------------------------------------------------------
    # start and the scheduling thread

    def start(self, events: ResourceManagerEvents) -> None:
        """Begin scheduling on a daemon thread; ``events`` receives every notification."""
        with self._cond:
            if self._closed:
                raise RuntimeError("the resource manager is closed")
            if self._thread is not None:
                raise RuntimeError("the resource manager was started already")
        self._connect()
        with self._cond:
            self._events = events
            self._thread = threading.Thread(
                target=self._schedule_loop, name=f"det-rm-{self._kind}-scheduler", daemon=True
            )
            self._thread.start()

    def _wake(self) -> None:
        """Ask for a scheduling pass (call with the lock held)."""
        self._dirty = True
        self._cond.notify_all()

    def _schedule_loop(self) -> None:
        while True:
            with self._cond:
                while not self._dirty and not self._closed:
                    timeout = self._idle_timeout_locked()
                    if not self._cond.wait(timeout) and timeout is not None:
                        break  # a periodic pass
                if self._closed:
                    return
                self._dirty = False
            try:
                self._refresh()
            except Exception:
                logger.exception("%s: refreshing the resource manager's view failed", self._kind)
            with self._cond:
                if self._closed:
                    return
                for pool, scheduler in self._schedulers.items():
                    slot_ids, node = self._disabled.get(pool, (frozenset(), False))
                    scheduler.set_disabled(slot_ids, node=node)  # also pools found since
                work = [
                    self._on_start_locked(pool, start)
                    for pool, scheduler in self._schedulers.items()
                    for start in scheduler.schedule()
                ]
            for step in work:
                step()

    def _assigned_locked(self, assignment: Assignment) -> None:
        """Record an allocation's resources (before ``allocation_assigned`` is notified)."""
        self._assigned[assignment.allocation_id] = assignment

    def _notify(self, method: str, *args: object) -> None:
        """Call ``events.<method>(*args)``; an exception there is logged, never raised."""
        events = self._events
        if events is None:
            return
        try:
            getattr(events, method)(*args)
        except Exception:
            logger.exception("resource manager event %s%r failed", method, args[:1])

    # -------------------------------------------------------------------------------------------
    # the queue

    def submit(self, request: AllocationRequest) -> None:
        """Queue ``request``; ValueError when it can never fit or its id is in use."""
        self._check_request(request)
        with self._cond:
            scheduler = self._schedulers[request.resource_pool]
            if request.slots <= scheduler.total_slots or not self.waits_for_capacity:
                problem = scheduler.unschedulable_reason(request)
                if problem is not None:
                    raise ValueError(problem)
            if request.allocation_id in self._pool_of:
                raise ValueError(f"allocation_id {request.allocation_id!r} was submitted already")
            scheduler.submit(request)
            self._pool_of[request.allocation_id] = request.resource_pool
            self._wake()

    def withdraw(self, allocation_id: str) -> None:
        """Drop a queued request; one assigned (or being assigned) but never launched is released."""
        with self._cond:
            pool = self._pool_of.get(allocation_id)
            if pool is None:
                return
            if self._schedulers[pool].withdraw(allocation_id):
                self._pool_of.pop(allocation_id, None)
                return
            if not self._is_launched_locked(allocation_id):
                self._release_locked(allocation_id)

    def release(self, allocation_id: str) -> None:
        """Free the allocation's slots; what of it still runs is killed first."""
        with self._cond:
            self._release_locked(allocation_id)

    def _release_locked(self, allocation_id: str) -> None:
        pool = self._pool_of.pop(allocation_id, None)
        if pool is not None:
            scheduler = self._schedulers[pool]
            if not scheduler.withdraw(allocation_id):
                scheduler.release(allocation_id)
        self._assigned.pop(allocation_id, None)
        self._free_locked(allocation_id)
        self._wake()

    def set_job_limits(
        self,
        job_id: str,
        *,
        priority: int | None = None,
        weight: float | None = None,
        max_slots: int | Unset | None = UNSET,
    ) -> None:
        """Change a job's priority, weight or ``max_slots`` in every pool; the queue is reconsidered."""
        with self._cond:
            for scheduler in self._schedulers.values():
                scheduler.set_job_limits(
                    job_id, priority=priority, weight=weight, max_slots=max_slots
                )
            self._wake()

    def set_disabled(
        self, resource_pool: str, slot_ids: Collection[int] = (), *, node: bool = False
    ) -> None:
        """No new allocation starts on ``slot_ids`` of ``resource_pool`` (``node``: on none of
        its slots, nor a 0-slot one); a pool this RM does not know yet keeps it for when it
        appears. The queue is reconsidered (enabling lets waiting requests start)."""
        with self._cond:
            if slot_ids or node:
                self._disabled[resource_pool] = (frozenset(slot_ids), node)
            else:
                self._disabled.pop(resource_pool, None)
            self._wake()

    # -------------------------------------------------------------------------------------------
    # processes

    def launch(self, spec: LaunchSpec) -> None:
        """Run the allocation's processes; the outcome arrives through the events."""
        allocation_id = spec.allocation_id
        with self._cond:
            if self._closed:
                raise RuntimeError("the resource manager is closed")
            assignment = self._assigned.get(allocation_id)
            if assignment is None:
                raise ValueError(f"allocation_id {allocation_id!r} is not assigned")
            if self._is_launched_locked(allocation_id):
                raise ValueError(f"allocation_id {allocation_id!r} was launched already")
            done = self._launch_locked(spec, assignment)
            self._launched = [event for event in self._launched if not event.is_set()]
            self._launched.append(done)

    def terminate(self, allocation_id: str) -> None:
        """SIGTERM to every process of the allocation (the preemption signal of a process)."""
        self._signal(allocation_id, signal.SIGTERM)

    def kill(self, allocation_id: str) -> None:
        """SIGKILL to every process of the allocation."""
        self._signal(allocation_id, signal.SIGKILL)

    def _signal(self, allocation_id: str, signum: int) -> None:
        with self._cond:
            if allocation_id in self._assigned and self._is_launched_locked(allocation_id):
                self._signal_locked(allocation_id, signum)

    # -------------------------------------------------------------------------------------------
    # description, validation, shutdown

    def queue_state(self) -> dict[str, dict[str, Any]]:
        """Each pool's slots, queued requests (in scheduling order) and running requests."""
        with self._cond:
            return {
                name: _pool_state(scheduler, self._slot_type)
                for name, scheduler in sorted(self._schedulers.items())
            }

    def slot_count(self) -> int:
        """Slots of the ``default`` pool (as last seen)."""
        with self._cond:
            scheduler = self._schedulers.get(DEFAULT_POOL)
            return scheduler.total_slots if scheduler is not None else 0

    @property
    def slot_type(self) -> str:
        """``"cuda"`` or ``"cpu"``."""
        return self._slot_type

    def validate(
        self, slots: int, *, max_slots: int | None = None, resource_pool: str = DEFAULT_POOL
    ) -> str | None:
        """The error for a request of ``slots`` that could never start here, else ``None``."""
        if not isinstance(slots, int) or isinstance(slots, bool) or slots < 0:
            return f"slots_per_trial must be an int >= 0, got {slots!r}"
        problem = self._refusal(slots, resource_pool)
        if problem is None and slots > 0 and max_slots is not None and slots > max_slots:
            problem = f"slots_per_trial {slots} exceeds resources.max_slots {max_slots}"
        return problem

    def close(self, timeout: float = 10.0) -> None:
        """Stop scheduling, kill every launched allocation and wait (at most ``timeout`` seconds)
        for their exits to be delivered. Subclasses extend it to give back what they hold."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            for allocation_id in list(self._assigned):
                if self._is_launched_locked(allocation_id):
                    self._signal_locked(allocation_id, signal.SIGKILL)
            launched = list(self._launched)
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        deadline = time.monotonic() + timeout
        for done in launched:
            done.wait(max(0.0, deadline - time.monotonic()))


def _request_state(scheduler: PriorityScheduler, request: AllocationRequest) -> dict[str, Any]:
    return {
        "allocation_id": request.allocation_id,
        "task_id": request.task_id,
        "job_id": request.job_id,
        "slots": request.slots,
        "priority": scheduler.priority_of(request),
        "weight": scheduler.weight_of(request),
    }


def _pool_state(scheduler: PriorityScheduler, slot_type: str) -> dict[str, Any]:
    owners: list[str | None] = [None] * scheduler.total_slots
    running = []
    for allocation_id, held in sorted(scheduler.running().items()):
        for slot in held.slot_ids:
            if 0 <= slot < len(owners):
                owners[slot] = allocation_id
        running.append({**_request_state(scheduler, held.request), "slot_ids": list(held.slot_ids)})
    return {
        "total_slots": scheduler.total_slots,
        "slot_type": slot_type,
        "slots": owners,
        "queued": [_request_state(scheduler, r) for r in scheduler.queued()],
        "running": running,
    }
