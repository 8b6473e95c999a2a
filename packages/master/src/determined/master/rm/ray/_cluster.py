"""The Ray cluster as det sees it: alive nodes, their slots per pool, and the placement of a trial.

Pure functions over the node records of ``ray.nodes()``, so the arithmetic is testable without Ray.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from determined.master.rm.ray._config import PoolConfig


@dataclass(frozen=True)
class Node:
    """One alive Ray node."""

    node_id: str
    address: str
    resources: dict[str, float]
    labels: dict[str, str] = field(default_factory=dict)


def alive_nodes(records: list[Mapping[str, Any]]) -> list[Node]:
    """The alive nodes of ``ray.nodes()`` output, in its order."""
    return [
        Node(
            node_id=str(r["NodeID"]),
            address=str(r.get("NodeManagerAddress") or ""),
            resources={str(k): float(v) for k, v in (r.get("Resources") or {}).items()},
            labels={str(k): str(v) for k, v in (r.get("Labels") or {}).items()},
        )
        for r in records
        if r.get("Alive", r.get("alive", False))
    ]


def cluster_slot_type(nodes: list[Node], configured: str) -> str:
    """``"cuda"`` or ``"cpu"``: the configured type, or for ``auto`` GPUs when any node has one."""
    if configured != "auto":
        return configured
    return "cuda" if any(n.resources.get("GPU", 0) >= 1 for n in nodes) else "cpu"


def default_cpus_per_slot(slot_type: str, configured: float | None) -> float:
    """CPUs reserved per slot: the configured value, else 1 on CPU slots and 0 on GPU slots."""
    if configured is not None:
        return configured
    return 1.0 if slot_type == "cpu" else 0.0


def node_slots(node: Node, slot_type: str, cpus_per_slot: float, pool: PoolConfig) -> int:
    """How many slots of ``pool`` the node offers (0 when it is not in the pool)."""
    if any(node.labels.get(k) != v for k, v in pool.labels.items()):
        return 0
    cpus = node.resources.get("CPU", 0.0)
    if slot_type == "cuda":
        slots = int(node.resources.get("GPU", 0.0))
        if cpus_per_slot > 0:
            slots = min(slots, math.floor(cpus / cpus_per_slot + 1e-9))
    else:
        slots = math.floor(cpus / cpus_per_slot + 1e-9)
    if pool.resource is not None:
        slots = min(slots, math.floor(node.resources.get(pool.resource, 0.0) + 1e-9))
    return max(slots, 0)


def bundles(
    slots: int, slot_type: str, cpus_per_slot: float, pool: PoolConfig
) -> list[dict[str, float]]:
    """The placement group's bundles: one per slot."""
    bundle: dict[str, float] = {}
    if slot_type == "cuda":
        bundle["GPU"] = 1.0
    if cpus_per_slot > 0:
        bundle["CPU"] = cpus_per_slot
    if pool.resource is not None:
        bundle[pool.resource] = 1.0
    return [dict(bundle) for _ in range(slots)]


def strategy(slots: int, per_node: list[int]) -> str:
    """``STRICT_PACK`` when the trial fits one node of the pool, ``SPREAD`` across nodes otherwise."""
    return "STRICT_PACK" if per_node and slots <= max(per_node) else "SPREAD"


def group_bundles(bundles_to_node: Mapping[int, str]) -> list[tuple[str, list[int]]]:
    """``[(node_id, [bundle indices])]``, one entry per node, the node of bundle 0 first (it hosts
    the chief: container rank 0)."""
    groups: dict[str, list[int]] = {}
    for index in sorted(bundles_to_node):
        groups.setdefault(str(bundles_to_node[index]), []).append(int(index))
    return list(groups.items())


def too_big(slots: int, pool_name: str, slot_type: str, per_node: list[int]) -> str | None:
    """The refusal for a request that can never fit the pool, with the numbers; else ``None``."""
    total = sum(per_node)
    if slots <= total:
        return None
    unit = "GPU" if slot_type == "cuda" else "CPU"
    offering = [n for n in per_node if n]
    if not offering:
        where = f"resource pool {pool_name!r}: no alive node offers its slots"
    else:
        shape = " + ".join(str(n) for n in offering)
        where = f"resource pool {pool_name!r}: {len(offering)} node(s) with {shape} slots"
    return f"slots_per_trial {slots} exceeds the {total} {unit} slots of the Ray cluster ({where})"
