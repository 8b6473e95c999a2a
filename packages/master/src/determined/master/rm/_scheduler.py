"""The priority scheduler: gang allocation of slots, pure and deterministic (queue in, starts out).

The rules, applied by :meth:`PriorityScheduler.schedule` on every pass:

1. Requests for 0 slots always start at once (they take no slot and ignore ``max_slots``).
2. The other queued requests are considered in order: effective priority (smaller first), then
   ``submitted_at``, then submission order. A job's priority set by ``set_job_limits`` overrides
   the priority of its requests.
3. Gang allocation: a request starts only with all its ``slots`` at once; it gets the
   lowest-numbered free slots.
4. ``max_slots``: a request that would take its job above the cap waits; it does not hold up
   anyone else (only its own job's releases can let it start).
5. A request that can never run (more slots than the machine, or than its own ``max_slots``) is
   skipped; ``ResourceManager.validate`` reports it before submission.
6. Backfilling without starvation: a request that fits only for lack of free slots is *blocked*;
   requests behind it (same or lower priority) that fit may still start ("backfill"), but each
   such start counts as one bypass of every blocked request ahead of it. Once a blocked request
   has been bypassed ``max_bypass`` times it holds a reservation: no request behind it that needs
   slots starts until it has started. So every request waits for at most ``max_bypass`` later
   requests (plus those of higher priority), and as running allocations are released it gets
   its slots. ``max_bypass=0`` gives strict in-order scheduling.

7. Disabled slots (``set_disabled``) take no new work; what runs on them keeps them until it is
   released. A disabled node (``node=True``, upstream's disabled agent) starts nothing, not even a
   request for 0 slots. A request waits while too few of the slots are enabled; it is not refused.

``weight`` is recorded (the fair-share scheduler of upstream used it) but does not change the
order of this scheduler. There is no preemption: a running allocation keeps its slots until it
is released.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from determined.master.rm._types import UNSET, AllocationRequest, Unset

DEFAULT_MAX_BYPASS = 4
"""How many later requests may start ahead of a blocked request before it reserves the slots."""


@dataclass(frozen=True)
class Start:
    """A decision of the scheduler: ``request`` starts on ``slot_ids``."""

    request: AllocationRequest
    slot_ids: list[int]


@dataclass(frozen=True)
class JobLimits:
    """Overrides of a job's scheduling settings; ``None``/``UNSET`` keeps the request's own."""

    priority: int | None = None
    weight: float | None = None
    max_slots: int | Unset | None = UNSET


@dataclass(frozen=True)
class Running:
    """An allocation holding slots."""

    request: AllocationRequest
    slot_ids: list[int]


class PriorityScheduler:
    """Gang-allocating priority scheduler over ``total_slots`` numbered slots of one node.

    Not thread-safe: the caller serialises calls (the local RM holds its lock around them).
    """

    def __init__(self, total_slots: int, *, max_bypass: int = DEFAULT_MAX_BYPASS) -> None:
        if total_slots < 0:
            raise ValueError(f"total_slots must be >= 0, got {total_slots}")
        if max_bypass < 0:
            raise ValueError(f"max_bypass must be >= 0, got {max_bypass}")
        self.total_slots = total_slots
        self.max_bypass = max_bypass
        self._queue: dict[str, AllocationRequest] = {}
        self._sequence: dict[str, int] = {}
        self._next_sequence = 0
        self._bypassed: dict[str, int] = {}
        self._running: dict[str, Running] = {}
        self._jobs: dict[str, JobLimits] = {}
        self._disabled_slots: frozenset[int] = frozenset()
        self._node_disabled = False

    # -------------------------------------------------------------------------------------------
    # inputs

    def submit(self, request: AllocationRequest) -> None:
        """Queue ``request``; ValueError when its allocation id is queued or running already."""
        allocation_id = request.allocation_id
        if allocation_id in self._queue or allocation_id in self._running:
            raise ValueError(f"allocation_id {allocation_id!r} was submitted already")
        self._queue[allocation_id] = request
        self._sequence[allocation_id] = self._next_sequence
        self._next_sequence += 1

    def withdraw(self, allocation_id: str) -> bool:
        """Drop a queued request; False when it is not queued."""
        if self._queue.pop(allocation_id, None) is None:
            return False
        self._sequence.pop(allocation_id, None)
        self._bypassed.pop(allocation_id, None)
        return True

    def release(self, allocation_id: str) -> list[int]:
        """Free the slots of a running allocation; the freed slot ids (empty when unknown)."""
        running = self._running.pop(allocation_id, None)
        return list(running.slot_ids) if running else []

    def set_job_limits(
        self,
        job_id: str,
        *,
        priority: int | None = None,
        weight: float | None = None,
        max_slots: int | Unset | None = UNSET,
    ) -> None:
        """Override the priority, weight or ``max_slots`` of every request of ``job_id``."""
        if priority is not None and not 1 <= priority <= 99:
            raise ValueError(f"priority must be in 1..99, got {priority!r}")
        if weight is not None and weight < 0:
            raise ValueError(f"weight must be >= 0, got {weight!r}")
        if not isinstance(max_slots, Unset) and max_slots is not None and max_slots < 0:
            raise ValueError(f"max_slots must be >= 0 or None, got {max_slots!r}")
        old = self._jobs.get(job_id, JobLimits())
        self._jobs[job_id] = JobLimits(
            priority=priority if priority is not None else old.priority,
            weight=weight if weight is not None else old.weight,
            max_slots=old.max_slots if isinstance(max_slots, Unset) else max_slots,
        )

    def set_disabled(self, slot_ids: Iterable[int] = (), *, node: bool = False) -> None:
        """Slots that take no new work (``node``: the whole node, 0-slot requests included);
        a call replaces the previous one, so ``set_disabled()`` enables everything again."""
        self._disabled_slots = frozenset(slot_ids)
        self._node_disabled = node

    # -------------------------------------------------------------------------------------------
    # views

    def priority_of(self, request: AllocationRequest) -> int:
        """The request's priority after its job's override."""
        limits = self._jobs.get(request.job_id)
        if limits is not None and limits.priority is not None:
            return limits.priority
        return request.priority

    def weight_of(self, request: AllocationRequest) -> float:
        """The request's weight after its job's override."""
        limits = self._jobs.get(request.job_id)
        if limits is not None and limits.weight is not None:
            return limits.weight
        return request.weight

    def max_slots_of(self, request: AllocationRequest) -> int | None:
        """The cap on its job's slots after the job's override; ``None`` for no cap."""
        limits = self._jobs.get(request.job_id)
        if limits is not None and not isinstance(limits.max_slots, Unset):
            return limits.max_slots
        return request.max_slots

    def unschedulable_reason(self, request: AllocationRequest) -> str | None:
        """Why ``request`` can never start here, or ``None`` when it can."""
        if request.slots > self.total_slots:
            return (
                f"slots_per_trial {request.slots} exceeds the {self.total_slots} slots"
                " of this machine"
            )
        cap = self.max_slots_of(request)
        if request.slots > 0 and cap is not None and request.slots > cap:
            return f"slots_per_trial {request.slots} exceeds max_slots {cap} of its job"
        return None

    def queued(self) -> list[AllocationRequest]:
        """The queued requests in scheduling order."""
        return sorted(self._queue.values(), key=self._order_key)

    def running(self) -> dict[str, Running]:
        """Allocation id → its request and slots, for every allocation holding slots."""
        return dict(self._running)

    def used_slots(self) -> int:
        """Slots held by running allocations."""
        return sum(len(r.slot_ids) for r in self._running.values())

    def free_slots(self) -> list[int]:
        """The slot ids that are free and enabled, ascending."""
        if self._node_disabled:
            return []
        taken = {slot for r in self._running.values() for slot in r.slot_ids}
        taken |= self._disabled_slots
        return [slot for slot in range(self.total_slots) if slot not in taken]

    def bypass_count(self, allocation_id: str) -> int:
        """How often later requests started while ``allocation_id`` waited for slots."""
        return self._bypassed.get(allocation_id, 0)

    def state_dict(self) -> dict[str, Any]:
        """A JSON-able snapshot for ``describe`` and debugging."""
        return {
            "total_slots": self.total_slots,
            "max_bypass": self.max_bypass,
            "queued": [r.allocation_id for r in self.queued()],
            "running": {k: list(v.slot_ids) for k, v in sorted(self._running.items())},
            "bypassed": dict(sorted(self._bypassed.items())),
        }

    # -------------------------------------------------------------------------------------------
    # the decision

    def schedule(self) -> list[Start]:
        """Start every request the rules allow now; the starts, in the order they were decided."""
        ordered = self.queued()
        free = self.free_slots()
        job_used: dict[str, int] = {}
        for running in self._running.values():
            job_id = running.request.job_id
            job_used[job_id] = job_used.get(job_id, 0) + len(running.slot_ids)

        starts: list[Start] = []
        if self._node_disabled:
            return starts
        for request in ordered:
            if request.slots == 0:
                starts.append(self._start(request, []))

        blocked: list[str] = []
        for request in ordered:
            if request.slots == 0 or self.unschedulable_reason(request) is not None:
                continue
            cap = self.max_slots_of(request)
            used = job_used.get(request.job_id, 0)
            if cap is not None and used + request.slots > cap:
                continue
            if request.slots > len(free):
                blocked.append(request.allocation_id)
                if self.bypass_count(request.allocation_id) >= self.max_bypass:
                    break
                continue
            slot_ids, free = free[: request.slots], free[request.slots :]
            starts.append(self._start(request, slot_ids))
            job_used[request.job_id] = used + request.slots
            for allocation_id in blocked:
                self._bypassed[allocation_id] = self.bypass_count(allocation_id) + 1
            if any(self.bypass_count(a) >= self.max_bypass for a in blocked):
                break
        return starts

    def _start(self, request: AllocationRequest, slot_ids: list[int]) -> Start:
        allocation_id = request.allocation_id
        del self._queue[allocation_id]
        self._sequence.pop(allocation_id, None)
        self._bypassed.pop(allocation_id, None)
        self._running[allocation_id] = Running(request, list(slot_ids))
        return Start(request, list(slot_ids))

    def _order_key(self, request: AllocationRequest) -> tuple[int, float, int]:
        return (
            self.priority_of(request),
            request.submitted_at,
            self._sequence[request.allocation_id],
        )
