"""The ``resource_manager: {type: ray, ...}`` section of the master config, checked field by field."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

RAY_KEYS = {
    "type",
    "address",
    "namespace",
    "slot_type",
    "cpus_per_slot",
    "resource_pools",
    "max_bypass",
    "runtime_env",
    "work_root",
    "cluster_name",
}
"""Keys of a ``resource_manager`` section the Ray resource manager understands."""

POOL_KEYS = {"resource", "labels"}


@dataclass(frozen=True)
class PoolConfig:
    """How a det resource pool maps onto the Ray cluster.

    Attributes:
        resource: a Ray custom resource the pool's nodes offer (``ray start --resources
            '{"det_pool_a100": 8}'``); each slot of a trial in the pool takes one unit of it.
            ``None``: every node belongs to the pool.
        labels: Ray node labels the pool's nodes carry (``ray start --labels``); every bundle of
            the trial's placement group asks for them.
    """

    resource: str | None = None
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class RayConfig:
    """The Ray resource manager's settings.

    Attributes:
        address: what ``ray.init(address=...)`` gets: ``"auto"`` (the cluster this machine is a
            node of), ``"HOST:PORT"`` of the head's GCS, or ``"ray://HOST:10001"`` (Ray Client);
            ``"local"`` starts a private one-node cluster (for trying it out).
        namespace: the Ray namespace of the master's actors.
        slot_type: ``"cuda"`` (a slot is a GPU), ``"cpu"``, or ``"auto"`` (GPUs when the cluster
            has any).
        cpus_per_slot: CPUs per slot; default 1 on CPU slots, 0 on GPU slots.
        resource_pools: pool name → :class:`PoolConfig`; ``default`` spans every node unless given.
        max_bypass: the priority scheduler's backfilling bound.
        runtime_env: a Ray runtime environment for the node actors (e.g. ``env_vars``).
        work_root: where each node unpacks trial contexts (default ``$TMPDIR/det-ray``).
    """

    address: str = "auto"
    namespace: str = "det"
    slot_type: str = "auto"
    cpus_per_slot: float | None = None
    resource_pools: dict[str, PoolConfig] = field(default_factory=dict)
    max_bypass: int = 4
    runtime_env: dict[str, Any] | None = None
    work_root: str | None = None

    def pool(self, name: str) -> PoolConfig:
        """The pool's settings; ValueError naming ``resource_pool`` for an unknown pool."""
        if name in self.resource_pools:
            return self.resource_pools[name]
        if name == "default":
            return PoolConfig()
        raise ValueError(
            f"resource_pool: no pool {name!r} in the Ray resource manager"
            f" (pools: {', '.join(self.pool_names())})"
        )

    def pool_names(self) -> list[str]:
        """Every pool, ``default`` first."""
        return ["default", *sorted(n for n in self.resource_pools if n != "default")]


def _fail(key: str, message: str) -> ValueError:
    return ValueError(f"resource_manager.{key}: {message}")


def _pools(raw: Any) -> dict[str, PoolConfig]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise _fail("resource_pools", f"must be a mapping of pool name to settings, got {raw!r}")
    pools: dict[str, PoolConfig] = {}
    for name, section in raw.items():
        key = f"resource_pools.{name}"
        section = section or {}
        if not isinstance(section, dict):
            raise _fail(key, f"must be a mapping, got {section!r}")
        unknown = sorted(set(section) - POOL_KEYS)
        if unknown:
            raise _fail(f"{key}.{unknown[0]}", f"unknown (known: {', '.join(sorted(POOL_KEYS))})")
        resource = section.get("resource")
        if resource is not None and (not isinstance(resource, str) or not resource):
            raise _fail(f"{key}.resource", f"must be a Ray resource name, got {resource!r}")
        labels = section.get("labels") or {}
        if not isinstance(labels, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in labels.items()
        ):
            raise _fail(f"{key}.labels", f"must map label names to strings, got {labels!r}")
        pools[str(name)] = PoolConfig(resource=resource, labels=dict(labels))
    return pools


def parse_config(section: dict[str, Any]) -> RayConfig:
    """A :class:`RayConfig` from the ``resource_manager`` section; ValueError naming the field."""
    unknown = sorted(set(section) - RAY_KEYS)
    if unknown:
        raise _fail(
            unknown[0],
            f"not a setting of the Ray resource manager (known: {', '.join(sorted(RAY_KEYS))})",
        )
    address = section.get("address") or "auto"
    if not isinstance(address, str):
        raise _fail(
            "address", f"must be a string such as 'auto' or 'ray://HOST:10001', got {address!r}"
        )
    namespace = section.get("namespace", "det")
    if not isinstance(namespace, str) or not namespace:
        raise _fail("namespace", f"must be a non-empty string, got {namespace!r}")
    slot_type = section.get("slot_type", "auto")
    if slot_type == "gpu":
        slot_type = "cuda"
    if slot_type not in ("auto", "cpu", "cuda"):
        raise _fail("slot_type", f"must be 'auto', 'cpu' or 'cuda', got {slot_type!r}")
    cpus = section.get("cpus_per_slot")
    if cpus is not None and (
        isinstance(cpus, bool)
        or not isinstance(cpus, (int, float))
        or not math.isfinite(cpus)
        or cpus < 0
    ):
        raise _fail("cpus_per_slot", f"must be a number >= 0, got {cpus!r}")
    if slot_type == "cpu" and cpus == 0:
        raise _fail("cpus_per_slot", "must be > 0 on CPU slots")
    max_bypass = section.get("max_bypass", 4)
    if not isinstance(max_bypass, int) or isinstance(max_bypass, bool) or max_bypass < 0:
        raise _fail("max_bypass", f"must be an integer >= 0, got {max_bypass!r}")
    runtime_env = section.get("runtime_env")
    if runtime_env is not None and not isinstance(runtime_env, dict):
        raise _fail(
            "runtime_env", f"must be a mapping (a Ray runtime environment), got {runtime_env!r}"
        )
    work_root = section.get("work_root")
    if work_root is not None and not isinstance(work_root, str):
        raise _fail("work_root", f"must be a directory path, got {work_root!r}")
    return RayConfig(
        address=address,
        namespace=namespace,
        slot_type=slot_type,
        cpus_per_slot=float(cpus) if cpus is not None else None,
        resource_pools=_pools(section.get("resource_pools")),
        max_bypass=max_bypass,
        runtime_env=dict(runtime_env) if runtime_env else None,
        work_root=work_root,
    )
