"""Slurm partitions as det resource pools: which partition a pool name means, its slot type,
its slots, and why a request can never fit it."""

from __future__ import annotations

from typing import Any

from determined.master.rm._scheduler import PriorityScheduler
from determined.master.rm.slurm._commands import Partition
from determined.master.rm.slurm._config import SlurmConfig
from determined.master.rm.slurm._script import gpu_layout

DEFAULT_POOL = "default"


class Pools:
    """The partitions as last seen by ``sinfo``, read through the config's overrides."""

    def __init__(self, config: SlurmConfig) -> None:
        self.config = config
        self.partitions: dict[str, Partition] = {}
        self.default = ""

    def update(self, partitions: dict[str, Partition]) -> None:
        """Take a new ``sinfo`` view; the default pool is the configured partition, else
        Slurm's default one."""
        self.partitions = partitions
        defaults = [p.name for p in partitions.values() if p.default]
        wanted = self.config.default_compute_resource_pool
        self.default = wanted or (defaults[0] if defaults else min(partitions, default=""))

    def name(self, resource_pool: str) -> str:
        """The partition a resource pool name means (``default``: the default partition)."""
        return self.default if resource_pool == DEFAULT_POOL else resource_pool

    def slot_type(self, partition: Partition) -> str:
        """``cuda`` or ``cpu``: the partition's override, the section's, else its GPUs decide."""
        slot_type = self.config.override(partition.name).slot_type or self.config.slot_type
        if slot_type == "auto":
            return "cuda" if partition.gpus > 0 else "cpu"
        return slot_type

    def cpus_per_slot(self, partition: Partition) -> int | None:
        """``--cpus-per-task`` of the partition's jobs (1 on CPU slots unless configured)."""
        cpus = self.config.override(partition.name).cpus_per_slot or self.config.cpus_per_slot
        if cpus is None and self.slot_type(partition) == "cpu":
            return 1
        return cpus

    def slots(self, partition: Partition) -> int:
        """The partition's slots: its GPUs, or its CPUs over ``cpus_per_slot``; 0 when down."""
        if not partition.up:
            return 0
        if self.slot_type(partition) == "cuda":
            return partition.gpus
        return partition.cpus // (self.cpus_per_slot(partition) or 1)

    def unknown(self, resource_pool: str) -> str:
        """The error for a pool that names no partition."""
        return (
            f"resource_pool: no Slurm partition {resource_pool!r}"
            f" (partitions: {', '.join(sorted(self.partitions)) or 'none'})"
        )

    def refusal(self, slots: int, resource_pool: str) -> str | None:
        """Why ``slots`` can never run in ``resource_pool``, else None."""
        name = self.name(resource_pool)
        partition = self.partitions.get(name)
        if partition is None:
            return self.unknown(resource_pool)
        total = self.slots(partition)
        slot_type = self.slot_type(partition)
        if slots > total:
            return (
                f"slots_per_trial {slots} exceeds the {total} {slot_type} slots of Slurm"
                f" partition {name!r}"
            )
        if (
            slot_type == "cuda"
            and slots > 0
            and gpu_layout(slots, partition.max_gpus_per_node) is None
        ):
            return (
                f"slots_per_trial {slots} cannot be split evenly over nodes of"
                f" {partition.max_gpus_per_node} GPUs in Slurm partition {name!r}"
            )
        return None

    def describe(self, schedulers: dict[str, PriorityScheduler]) -> dict[str, dict[str, Any]]:
        """What ``describe`` shows of each partition: slots, use, queue, slot type, nodes."""
        return {
            name: {
                "slots": scheduler.total_slots,
                "used": scheduler.used_slots(),
                "queued": len(scheduler.queued()),
                "slot_type": self.slot_type(self.partitions[name]),
                "nodes": self.partitions[name].nodes,
                "description": self.config.override(name).description,
            }
            for name, scheduler in schedulers.items()
            if name in self.partitions
        }
