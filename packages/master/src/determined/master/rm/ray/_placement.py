"""From a request to a placement group and back: the Ray calls of placing one allocation.

``create`` asks Ray for the request's bundles; once the group is ready, ``containers`` reads where
Ray put each bundle (and, on GPUs, which GPU each one reserved) and groups them by node.
"""

from __future__ import annotations

from typing import Any

from determined.master.rm.ray import _cluster
from determined.master.rm.ray._config import PoolConfig
from determined.master.rm.ray._run import Container


def create(
    ray: Any,
    allocation_id: str,
    slots: int,
    slot_type: str,
    cpus_per_slot: float,
    pool: PoolConfig,
    per_node: list[int],
) -> Any:
    """A placement group of one bundle per slot: ``STRICT_PACK`` when one node of the pool can
    hold them all, ``SPREAD`` otherwise; bundles carry the pool's label selector."""
    bundles = _cluster.bundles(slots, slot_type, cpus_per_slot, pool)
    kwargs: dict[str, Any] = {
        "strategy": _cluster.strategy(slots, per_node),
        "name": f"det-{allocation_id}",
    }
    if pool.labels:
        kwargs["bundle_label_selector"] = [dict(pool.labels) for _ in bundles]
    return ray.util.placement_group(bundles, **kwargs)


def containers(
    ray: Any, pg: Any, gpu_probe: Any, cuda: bool, addresses: dict[str, str]
) -> list[Container]:
    """One container per node of the ready group ``pg``, its bundles and slot ids.

    ``gpu_probe``: the remote function ``_node.bundle_gpu_ids`` (only called when ``cuda``);
    ``addresses``: node id -> address.
    """
    table = ray.util.placement_group_table(pg)
    groups = _cluster.group_bundles(table["bundles_to_node_id"])
    gpu_ids: dict[int, str] = {}
    if cuda:
        gpu_ids = probe_gpus(ray, gpu_probe, pg, len(table["bundles_to_node_id"]))
    result = []
    for node_id, indices in groups:
        if cuda:
            slot_ids = [int(gpu_ids[i]) if gpu_ids[i].isdigit() else i for i in indices]
        else:
            slot_ids = list(range(len(indices)))
        result.append(Container(node_id, addresses.get(node_id, "127.0.0.1"), indices, slot_ids))
    return result


def probe_gpus(ray: Any, gpu_probe: Any, pg: Any, count: int) -> dict[int, str]:
    """The GPU each bundle reserved (Ray fixes it when the group is placed)."""
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    refs = [
        gpu_probe.options(
            num_cpus=0,
            num_gpus=1,
            scheduling_strategy=PlacementGroupSchedulingStrategy(
                pg, placement_group_bundle_index=index
            ),
        ).remote()
        for index in range(count)
    ]
    return {index: ids[0] for index, ids in enumerate(ray.get(refs))}
