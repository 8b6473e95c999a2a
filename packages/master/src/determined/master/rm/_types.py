"""The values exchanged between det-master's core and its resource managers.

All of them are frozen dataclasses: a request goes in (:class:`AllocationRequest`), an
:class:`Assignment` comes back through :class:`ResourceManagerEvents`, then a :class:`LaunchSpec`
goes in and :class:`LogLine` batches and an exit come back.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

LOG_LEVELS = ("TRACE", "DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
"""Severity prefixes recognised at the start of a log line (after an optional rank prefix)."""


class Unset(enum.Enum):
    """The type of :data:`UNSET`: "argument not given", distinct from an explicit ``None``."""

    UNSET = "unset"

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Literal[Unset.UNSET] = Unset.UNSET
"""Default of arguments where ``None`` is a meaningful value (e.g. ``max_slots=None``: no cap)."""


@dataclass(frozen=True)
class AllocationRequest:
    """A request for the slots of one allocation (one attempt at running a task).

    Attributes:
        allocation_id: ``"<task_id>.<run_id>"``; unique among the requests of one RM.
        task_id: the task (trial) the allocation runs.
        job_id: the scheduling group (an experiment's job, e.g. ``"exp-3"``) for
            ``max_slots``/``priority``/``weight``.
        slots: ``resources.slots_per_trial``; 0 is a CPU-only task that takes no slot.
        priority: 1..99, smaller is more important.
        weight: the job's fair-share weight (recorded; the priority scheduler does not use it).
        max_slots: cap on the slots used at once by all allocations of ``job_id``.
        resource_pool: the pool asked for (the local RM has one, ``"default"``).
        submitted_at: ``time.time()`` of submission; orders requests inside a priority.
        options: settings for one kind of resource manager, by its name (the experiment's
            ``slurm`` section for the Slurm RM: ``sbatch_args``, ``gpu_type``,
            ``slots_per_node``); others ignore them.
    """

    allocation_id: str
    task_id: str
    job_id: str
    slots: int
    priority: int = 42
    weight: float = 1.0
    max_slots: int | None = None
    resource_pool: str = "default"
    submitted_at: float = 0.0
    options: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)

    def __post_init__(self) -> None:
        if not self.allocation_id:
            raise ValueError("allocation_id must not be empty")
        if not isinstance(self.slots, int) or isinstance(self.slots, bool) or self.slots < 0:
            raise ValueError(f"slots must be an int >= 0, got {self.slots!r}")
        if not 1 <= self.priority <= 99:
            raise ValueError(f"priority must be in 1..99, got {self.priority!r}")
        if self.max_slots is not None and self.max_slots < 0:
            raise ValueError(f"max_slots must be >= 0 or None, got {self.max_slots!r}")
        if self.weight < 0:
            raise ValueError(f"weight must be >= 0, got {self.weight!r}")


@dataclass(frozen=True)
class Assignment:
    """The resources given to an allocation.

    Attributes:
        allocation_id: the request this answers.
        slot_ids: slot indices on the node (GPU indices, or CPU slot numbers); empty for 0 slots.
        container_addrs: one address per container; ``["127.0.0.1"]`` for the local RM.
        container_slot_counts: the slots of each container.
        gpu_uuids: the UUIDs of the assigned GPUs; empty on CPU slots.
    """

    allocation_id: str
    slot_ids: list[int]
    container_addrs: list[str]
    container_slot_counts: list[int]
    gpu_uuids: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class LaunchSpec:
    """How to run an assigned allocation's process.

    Attributes:
        allocation_id: an allocation that was assigned and not yet launched.
        argv: the entrypoint, already split (e.g. ``["python3", "train.py"]``); ``argv[0]`` is
            looked up on ``env["PATH"]``.
        cwd: the work directory (the context, already extracted by the master).
        env: the complete environment of the child.
        startup_hook: a ``startup-hook.sh`` run with bash, in ``cwd`` with ``env``, before argv;
            its failure is the launch's failure.
    """

    allocation_id: str
    argv: list[str]
    cwd: str
    env: dict[str, str]
    startup_hook: str | None = None

    def __post_init__(self) -> None:
        if not self.argv:
            raise ValueError("argv must name a program to run")


@dataclass(frozen=True)
class LogLine:
    """One line a process wrote, parsed like Determined's log shipper does.

    Attributes:
        timestamp: ``time.time()`` when the line was read.
        stdtype: ``"stdout"`` or ``"stderr"``.
        rank_id: N from a leading ``"[rank=N] "``, else ``None``.
        level: ``"LOG_LEVEL_INFO"`` etc. from a leading ``"INFO:"`` (after the rank prefix), else
            ``None``.
        message: the line without its end of line and without the rank and level prefixes.
    """

    timestamp: float
    stdtype: str
    rank_id: int | None
    level: str | None
    message: str


_RANK_PREFIX = re.compile(r" ?\[rank=(?P<rank>[0-9]+)\] ?(?P<rest>.*)", re.DOTALL)
_LEVEL_PREFIX = re.compile(
    r" ?(?P<level>" + "|".join(LOG_LEVELS) + r"): ?(?P<rest>.*)",
    re.DOTALL,
)


def parse_log_line(text: str, stdtype: str, timestamp: float) -> LogLine:
    """Split ``text`` (one line, without its end of line) into rank, level and message."""
    rank_id: int | None = None
    level: str | None = None
    match = _RANK_PREFIX.match(text)
    if match:
        rank_id = int(match.group("rank"))
        text = match.group("rest")
    match = _LEVEL_PREFIX.match(text)
    if match:
        level = f"LOG_LEVEL_{match.group('level')}"
        text = match.group("rest")
    return LogLine(timestamp=timestamp, stdtype=stdtype, rank_id=rank_id, level=level, message=text)


class ResourceManagerEvents(Protocol):
    """What a resource manager tells the master; called from the RM's own threads.

    Implementations must be thread-safe and must not block for long (logs of every allocation
    and the scheduling go through these calls).
    """

    def allocation_assigned(self, request: AllocationRequest, assignment: Assignment) -> None:
        """The request got its slots; the master answers with ``launch`` (or ``release``)."""

    def allocation_started(self, allocation_id: str, pid: int) -> None:
        """The process of a launched allocation runs, as process group ``pid``."""

    def allocation_log(self, allocation_id: str, lines: list[LogLine]) -> None:
        """A batch of lines, in the order each stream wrote them."""

    def allocation_exited(
        self, allocation_id: str, exit_code: int | None, error: str | None
    ) -> None:
        """Called exactly once per launched allocation, after its last ``allocation_log``.

        ``exit_code`` is negative for death by signal; ``None`` with ``error`` when the process
        could not start.
        """
