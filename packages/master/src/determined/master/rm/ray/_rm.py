"""The Ray resource manager: det's queue decides, Ray's placement groups place, actors run.

The master's rules stay the master's: one :class:`PriorityScheduler` per resource pool, sized by
the pool's slots in the alive Ray nodes, decides which request may start (priorities, ``max_slots``,
gang allocation, bounded backfilling). A request it starts becomes a placement group of one bundle
per slot (``STRICT_PACK`` when it fits one node of the pool, ``SPREAD`` otherwise); once Ray has
reserved every bundle the allocation is assigned, with one container per node of the placement.
``launch`` then hands the allocation to a :class:`Runner` (``_run``). The queue, the scheduling
thread and signal delivery are :class:`ThreadedResourceManager`'s.

``import ray`` happens in :meth:`RayResourceManager.start` only: a master on the local resource
manager never imports it.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable
from functools import partial
from typing import Any

from determined.master.rm._scheduler import PriorityScheduler, Start
from determined.master.rm._threaded import DEFAULT_POOL, ThreadedResourceManager
from determined.master.rm._types import AllocationRequest, Assignment, LaunchSpec
from determined.master.rm.ray import _cluster, _placement
from determined.master.rm.ray._agents import Agents
from determined.master.rm.ray._config import RayConfig
from determined.master.rm.ray._node import bundle_gpu_ids
from determined.master.rm.ray._run import Container, Placed, Runner

logger = logging.getLogger("determined.master.rm")

PLACEMENT_WAIT_S = 0.5
"""How long one wait for a placement group lasts before a withdrawal is checked again."""
ZERO_SLOTS = (
    "slots_per_trial 0: the Ray resource manager places trials on slots; ask for at least 1"
)
"""Why a CPU-only task (``slots_per_trial: 0``) is refused: Ray places bundles of slots."""
REFRESH_S = 2.0
"""How often the view of the cluster is refreshed while requests wait (nodes join and leave)."""


class RayResourceManager(ThreadedResourceManager):
    """Runs allocations on a Ray cluster (see the module docstring).

    Args:
        config: the parsed ``resource_manager`` section.
    """

    waits_for_capacity = True  # a lost node may come back, an autoscaler may add some

    def __init__(self, config: RayConfig) -> None:
        super().__init__("ray")
        self.config = config
        self._ray: Any = None
        self._owns_ray = False
        self._agents: Agents | None = None
        self._gpu_probe: Any = None
        self._nodes: list[_cluster.Node] = []
        self._cpus_per_slot = 1.0
        self._placing: dict[str, Any] = {}
        self._placed: dict[str, Placed] = {}

    # -------------------------------------------------------------------------------------------
    # start-up and the view of the cluster

    def _connect(self) -> None:
        """Connect to Ray (unless this process is connected already) and warm the node agents."""
        import ray
        import ray.util

        if not ray.is_initialized():
            address = None if self.config.address == "local" else self.config.address
            kwargs: dict[str, Any] = {"namespace": self.config.namespace, "log_to_driver": False}
            if address is None:
                kwargs["include_dashboard"] = False
            try:
                ray.init(address=address, **kwargs)
            except Exception as exc:
                raise RuntimeError(
                    f"resource_manager.address: cannot connect to Ray at"
                    f" {self.config.address!r}: {exc}"
                ) from exc
            self._owns_ray = True
        self._ray = ray
        self._agents = Agents(ray, self.config.work_root, self.config.runtime_env)
        self._gpu_probe = ray.remote(bundle_gpu_ids)
        self._refresh()
        for node in self._nodes:  # warm: the first trial on a node need not wait for its agent
            self._agents.get(node.node_id)

    def _refresh(self) -> None:
        """Re-read the alive nodes and resize every pool's scheduler to the slots they offer."""
        nodes = _cluster.alive_nodes(self._ray.nodes())
        with self._cond:
            self._nodes = nodes
            self._slot_type = _cluster.cluster_slot_type(nodes, self.config.slot_type)
            self._cpus_per_slot = _cluster.default_cpus_per_slot(
                self._slot_type, self.config.cpus_per_slot
            )
            for name in self.config.pool_names():
                total = sum(self._per_node_locked(name))
                scheduler = self._schedulers.get(name)
                if scheduler is None:
                    scheduler = PriorityScheduler(total, max_bypass=self.config.max_bypass)
                    self._schedulers[name] = scheduler
                elif scheduler.total_slots != total:
                    logger.info("ray: pool %r now has %d slots", name, total)
                    scheduler.total_slots = total

    def _per_node_locked(self, pool_name: str) -> list[int]:
        pool = self.config.pool(pool_name)
        return [
            _cluster.node_slots(n, self._slot_type, self._cpus_per_slot, pool) for n in self._nodes
        ]

    def _idle_timeout_locked(self) -> float | None:
        """A look at the cluster every ``REFRESH_S`` while requests wait (nodes join and leave)."""
        return REFRESH_S if any(s.queued() for s in self._schedulers.values()) else None

    # -------------------------------------------------------------------------------------------
    # requests

    def _check_request(self, request: AllocationRequest) -> None:
        self.config.pool(request.resource_pool)
        if request.slots == 0:
            raise ValueError(ZERO_SLOTS)

    def _refusal(self, slots: int, resource_pool: str) -> str | None:
        """Reads the cluster afresh, so the numbers in the message are the current ones."""
        if slots == 0:
            return ZERO_SLOTS
        try:
            self.config.pool(resource_pool)
        except ValueError as exc:
            return str(exc)
        if self._ray is not None:
            try:
                self._refresh()
            except Exception:
                logger.exception("ray: reading the cluster's nodes failed")
        with self._cond:
            return _cluster.too_big(
                slots, resource_pool, self._slot_type, self._per_node_locked(resource_pool)
            )

    # -------------------------------------------------------------------------------------------
    # placement, processes and release

    def _on_start_locked(self, pool: str, start: Start) -> Callable[[], None]:
        """Reserve the request's bundles: a placement group, assigned once Ray has placed it."""
        self._placing[start.request.allocation_id] = None
        return partial(self._place, pool, start.request)

    def _place(self, pool_name: str, request: AllocationRequest) -> None:
        """Create the request's placement group and a thread that waits for it."""
        aid = request.allocation_id
        with self._cond:
            pool = self.config.pool(pool_name)
            per_node = self._per_node_locked(pool_name)
            slot_type, cpus_per_slot = self._slot_type, self._cpus_per_slot
        try:
            pg = _placement.create(
                self._ray, aid, request.slots, slot_type, cpus_per_slot, pool, per_node
            )
        except Exception:
            logger.exception("ray: creating the placement group of %s failed", aid)
            with self._cond:
                self._release_locked(aid)
            return
        with self._cond:
            if aid not in self._placing:  # released meanwhile
                self._give_back_later(None, pg)
                return
            self._placing[aid] = pg
        threading.Thread(
            target=self._await_placement,
            args=(request, pg),
            name=f"det-rm-ray-place-{aid}",
            daemon=True,
        ).start()

    def _await_placement(self, request: AllocationRequest, pg: Any) -> None:
        ray = self._ray
        aid = request.allocation_id
        ready = pg.ready()
        while True:
            with self._cond:
                if self._closed or self._placing.get(aid) is not pg:
                    return
            done, _ = ray.wait([ready], timeout=PLACEMENT_WAIT_S)
            if done:
                break
        with self._cond:
            addresses = {n.node_id: n.address for n in self._nodes}
        try:
            ray.get(ready)
            cuda = self._slot_type == "cuda"
            containers = _placement.containers(ray, pg, self._gpu_probe, cuda, addresses)
        except Exception:
            logger.exception("ray: the placement group of %s failed", aid)
            with self._cond:
                self._release_locked(aid)
            return
        self._assign(request, pg, containers)

    def _assign(self, request: AllocationRequest, pg: Any, containers: list[Container]) -> None:
        aid = request.allocation_id
        assignment = Assignment(
            allocation_id=aid,
            slot_ids=list(containers[0].slot_ids) if containers else [],
            container_addrs=[c.address for c in containers] or ["127.0.0.1"],
            container_slot_counts=[len(c.bundle_indices) for c in containers] or [0],
        )
        with self._cond:
            if aid not in self._placing:
                if pg is not None:
                    self._give_back_later(None, pg)
                return
            del self._placing[aid]
            self._placed[aid] = Placed(aid, pg, containers)
            self._assigned_locked(assignment)
        self._notify("allocation_assigned", request, assignment)

    def _is_launched_locked(self, allocation_id: str) -> bool:
        placed = self._placed.get(allocation_id)
        return placed is not None and placed.runner is not None

    def _launch_locked(self, spec: LaunchSpec, assignment: Assignment) -> threading.Event:
        """Start the allocation's ranks on its nodes (a :class:`Runner` thread)."""
        aid = spec.allocation_id
        placed = self._placed[aid]
        if not placed.containers:
            raise ValueError(
                f"allocation_id {aid!r}: the Ray resource manager runs only tasks with"
                " slots_per_trial >= 1"
            )
        runner = Runner(
            self._ray,
            self._agents,
            placed,
            spec,
            self._notify,
            self._cond,
            self._slot_type == "cuda",
        )
        placed.runner = threading.Thread(
            target=runner.run, name=f"det-rm-ray-run-{aid}", daemon=True
        )
        placed.runner.start()
        return placed.done

    def _signal_locked(self, allocation_id: str, signum: int) -> None:
        """``signum`` to the process group of the allocation on every node."""
        self._placed[allocation_id].send(signum)

    def _free_locked(self, allocation_id: str) -> None:
        """Kill what still runs and give the allocation's bundles back to Ray."""
        pg = self._placing.pop(allocation_id, None)
        placed = self._placed.pop(allocation_id, None)
        if placed is not None:
            placed.send(signal.SIGKILL)
            pg = placed.pg
        if pg is not None or placed is not None:
            self._give_back_later(placed, pg)

    def _give_back_later(self, placed: Placed | None, pg: Any) -> None:
        threading.Thread(target=self._give_back, args=(placed, pg), daemon=True).start()

    def _give_back(self, placed: Placed | None, pg: Any) -> None:
        """Remove the placement group (after the runner is done with the allocation)."""
        if placed is not None and placed.runner is not None:
            placed.done.wait(30)
        try:
            if pg is not None:
                self._ray.util.remove_placement_group(pg)
        except Exception:
            logger.exception("ray: giving back a placement group failed")

    def reap_orphan(self, pid: int, *, allocation_id: str | None = None) -> bool:
        """Nothing to reap: the node actors belong to this master's Ray driver, so Ray ends them
        when a master dies, and each actor's watcher then kills its ranks. Always False."""
        return False

    # -------------------------------------------------------------------------------------------
    # description, shutdown

    def describe(self) -> dict[str, Any]:
        """``{"type": "ray", "address", "slots", "slot_type", "used", "queued", "running",
        "nodes", "pools"}`` from the last view of the cluster (no Ray call)."""
        with self._cond:
            pools = {
                name: {
                    "slots": scheduler.total_slots,
                    "used": scheduler.used_slots(),
                    "queued": len(scheduler.queued()),
                }
                for name, scheduler in self._schedulers.items()
            }
            default = pools.get(DEFAULT_POOL, {"slots": 0, "used": 0})
            return {
                "type": "ray",
                "address": self.config.address,
                "slots": default["slots"],
                "slot_type": self._slot_type,
                "used": default["used"],
                "queued": sum(p["queued"] for p in pools.values()),
                "running": sum(1 for p in self._placed.values() if p.runner is not None),
                "nodes": [
                    {
                        "node_id": n.node_id,
                        "address": n.address,
                        "slots": _cluster.node_slots(
                            n, self._slot_type, self._cpus_per_slot, self.config.pool("default")
                        ),
                    }
                    for n in self._nodes
                ],
                "pools": pools,
            }

    def close(self, timeout: float = 10.0) -> None:
        """Stop scheduling, kill every allocation's ranks, remove the placement groups, and
        disconnect from Ray when this resource manager connected."""
        with self._cond:
            groups = [p.pg for p in self._placed.values()]
            groups += [pg for pg in self._placing.values() if pg is not None]
        super().close(timeout)
        ray = self._ray
        if ray is None:
            return
        if self._agents is not None:
            self._agents.close()
        for pg in groups:
            try:
                ray.util.remove_placement_group(pg)
            except Exception:
                pass
        if self._owns_ray:
            ray.shutdown()
