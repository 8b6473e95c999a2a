"""The interface every resource manager implements (local processes, Ray, ...)."""

from __future__ import annotations

import abc
from collections.abc import Collection
from typing import Any

from determined.master.rm._types import (
    UNSET,
    AllocationRequest,
    LaunchSpec,
    ResourceManagerEvents,
    Unset,
)


class ResourceManager(abc.ABC):
    """Schedules allocation requests onto slots and runs the allocations' processes.

    The master calls ``start`` once, then ``submit``/``withdraw``/``launch``/``terminate``/
    ``kill``/``release`` from any thread; the RM answers through the ``ResourceManagerEvents``
    given to ``start``, from its own threads. An RM never frees slots on its own when a process
    exits: the master calls ``release``.
    """

    @abc.abstractmethod
    def start(self, events: ResourceManagerEvents) -> None:
        """Begin scheduling; ``events`` receives every later notification."""

    @abc.abstractmethod
    def submit(self, request: AllocationRequest) -> None:
        """Queue ``request``; it is scheduled asynchronously (``allocation_assigned``)."""

    @abc.abstractmethod
    def withdraw(self, allocation_id: str) -> None:
        """Drop a queued request; no-op for an unknown id."""

    @abc.abstractmethod
    def launch(self, spec: LaunchSpec) -> None:
        """Run the process of an assigned allocation."""

    @abc.abstractmethod
    def terminate(self, allocation_id: str) -> None:
        """Ask the allocation's processes to stop (SIGTERM to the whole process group)."""

    @abc.abstractmethod
    def kill(self, allocation_id: str) -> None:
        """Stop the allocation's processes now (SIGKILL to the whole process group)."""

    @abc.abstractmethod
    def release(self, allocation_id: str) -> None:
        """Free the allocation's slots (after its exit, or when it was never launched)."""

    @abc.abstractmethod
    def set_job_limits(
        self,
        job_id: str,
        *,
        priority: int | None = None,
        weight: float | None = None,
        max_slots: int | Unset | None = UNSET,
    ) -> None:
        """Change a job's priority, weight or ``max_slots`` (``None`` removes the cap)."""

    def set_disabled(
        self, resource_pool: str, slot_ids: Collection[int] = (), *, node: bool = False
    ) -> None:
        """Take ``slot_ids`` of ``resource_pool`` (``node``: the pool's whole node, requests for 0
        slots included) out of scheduling: no new allocation starts there, running ones go on.
        A call replaces the previous one for the pool; ``set_disabled(pool)`` enables it all.

        Raises:
            ValueError: when this resource manager cannot disable slots (this default).
        """
        raise ValueError(f"{type(self).__name__} cannot disable agents or slots")

    @abc.abstractmethod
    def reap_orphan(self, pid: int) -> bool:
        """Kill the process group ``pid`` left by a previous master, if it is one of ours.

        Returns:
            True when a group was killed; False when there was none or it is not an allocation's
            (a pid reused by an unrelated process is never touched).
        """

    @abc.abstractmethod
    def slot_count(self) -> int:
        """Total slots this RM schedules."""

    @abc.abstractmethod
    def describe(self) -> dict[str, Any]:
        """A JSON-able summary: ``type``, ``slots``, ``slot_type``, ``used``, ``queued``."""

    def queue_state(self) -> dict[str, dict[str, Any]]:
        """The queue of each resource pool, for ``det job list`` and ``det slot list``.

        Per pool name: ``total_slots``, ``slot_type``, ``slots`` (the allocation id holding each
        slot, or ``None``), ``queued`` (waiting requests in scheduling order) and ``running``
        (requests holding slots, with their ``slot_ids``); each request is a dict of
        ``allocation_id``, ``task_id``, ``job_id``, ``slots``, ``priority`` and ``weight``. A resource manager
        that keeps no queue of its own answers ``{}`` (this default).
        """
        return {}

    @abc.abstractmethod
    def validate(self, slots: int, *, resource_pool: str = "default") -> str | None:
        """An error message when a request for ``slots`` in ``resource_pool`` can never fit (or
        the pool does not exist), else ``None``."""

    @abc.abstractmethod
    def close(self) -> None:
        """Stop scheduling and kill every running process group."""
