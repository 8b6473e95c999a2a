"""The Ray resource manager: det's queue decides, Ray's placement groups place, actors run.

The master's rules stay the master's: one :class:`PriorityScheduler` per resource pool, sized by
the pool's slots in the alive Ray nodes, decides which request may start (priorities, ``max_slots``,
gang allocation, bounded backfilling). A request it starts becomes a placement group of one bundle
per slot (``STRICT_PACK`` when it fits one node of the pool, ``SPREAD`` otherwise); once Ray has
reserved every bundle the allocation is assigned, with one container per node of the placement.
``launch`` then hands the allocation to a :class:`Runner` (``_run``).

``import ray`` happens in :meth:`RayResourceManager.start` only: a master on the local resource
manager never imports it.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
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
from determined.master.rm.ray import _cluster
from determined.master.rm.ray._agents import Agents
from determined.master.rm.ray._config import RayConfig
from determined.master.rm.ray._node import bundle_gpu_ids
from determined.master.rm.ray._run import Container, Placed, Runner

logger = logging.getLogger("determined.master.rm")

PLACEMENT_WAIT_S = 0.5
"""How long one wait for a placement group lasts before a withdrawal is checked again."""
REFRESH_S = 2.0
"""How often the view of the cluster is refreshed while requests wait (nodes join and leave)."""


class RayResourceManager(ResourceManager):
    """Runs allocations on a Ray cluster (see the module docstring).

    Args:
        config: the parsed ``resource_manager`` section.
    """

    def __init__(self, config: RayConfig) -> None:
        self.config = config
        self._ray: Any = None
        self._owns_ray = False
        self._agents: Agents | None = None
        self._gpu_probe: Any = None
        self._cond = threading.Condition()
        self._dirty = True
        self._closed = False
        self._events: ResourceManagerEvents | None = None
        self._thread: threading.Thread | None = None
        self._schedulers: dict[str, PriorityScheduler] = {}
        self._pool_of: dict[str, str] = {}
        self._nodes: list[_cluster.Node] = []
        self._slot_type = "cpu"
        self._cpus_per_slot = 1.0
        self._placing: dict[str, Any] = {}
        self._placed: dict[str, Placed] = {}
        self._assigned: dict[str, Assignment] = {}
        self._all_placed: list[Placed] = []

    # -------------------------------------------------------------------------------------------
    # start-up and the view of the cluster

    def start(self, events: ResourceManagerEvents) -> None:
        """Connect to Ray (unless this process is connected already) and begin scheduling."""
        import ray
        import ray.util

        with self._cond:
            if self._closed:
                raise RuntimeError("the resource manager is closed")
            if self._thread is not None:
                raise RuntimeError("the resource manager was started already")
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
        with self._cond:
            self._events = events
            self._thread = threading.Thread(
                target=self._schedule_loop, name="det-rm-ray-scheduler", daemon=True
            )
            self._thread.start()

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

    # -------------------------------------------------------------------------------------------
    # the queue

    def submit(self, request: AllocationRequest) -> None:
        """Queue ``request``; ValueError when it can never fit its pool or its id is in use."""
        self.config.pool(request.resource_pool)
        if request.slots == 0:
            raise ValueError(
                "slots_per_trial 0: the Ray resource manager places trials on slots; ask for"
                " at least 1"
            )
        with self._cond:
            scheduler = self._schedulers[request.resource_pool]
            # More slots than the pool has right now waits (a lost node may come back, an
            # autoscaler may add some): ``validate`` refuses what can never fit at submission.
            if request.slots <= scheduler.total_slots:
                problem = scheduler.unschedulable_reason(request)
                if problem is not None:
                    raise ValueError(problem)
            if request.allocation_id in self._pool_of:
                raise ValueError(f"allocation_id {request.allocation_id!r} was submitted already")
            scheduler.submit(request)
            self._pool_of[request.allocation_id] = request.resource_pool
            self._wake()

    def _too_big_locked(self, slots: int, pool_name: str) -> str | None:
        return _cluster.too_big(slots, pool_name, self._slot_type, self._per_node_locked(pool_name))

    def withdraw(self, allocation_id: str) -> None:
        """Drop a queued request; one placed or being placed but never launched is released."""
        with self._cond:
            pool = self._pool_of.get(allocation_id)
            if pool is None:
                return
            if self._schedulers[pool].withdraw(allocation_id):
                self._pool_of.pop(allocation_id, None)
                return
            placed = self._placed.get(allocation_id)
            if placed is None or placed.runner is None:
                self._release_locked(allocation_id)

    def release(self, allocation_id: str) -> None:
        """Free the allocation's slots, kill what still runs and give its bundles back to Ray."""
        with self._cond:
            self._release_locked(allocation_id)

    def _release_locked(self, allocation_id: str) -> None:
        pool = self._pool_of.pop(allocation_id, None)
        if pool is not None:
            scheduler = self._schedulers[pool]
            if not scheduler.withdraw(allocation_id):
                scheduler.release(allocation_id)
        self._assigned.pop(allocation_id, None)
        pg = self._placing.pop(allocation_id, None)
        placed = self._placed.pop(allocation_id, None)
        if placed is not None:
            placed.send(signal.SIGKILL)
            pg = placed.pg
        if pg is not None or placed is not None:
            threading.Thread(
                target=self._give_back,
                args=(placed, pg),
                name=f"det-rm-ray-release-{allocation_id}",
                daemon=True,
            ).start()
        self._wake()

    def _give_back(self, placed: Placed | None, pg: Any) -> None:
        """Remove the placement group (after the runner is done with the allocation)."""
        ray = self._ray
        if placed is not None and placed.runner is not None:
            placed.done.wait(30)
        try:
            if pg is not None:
                ray.util.remove_placement_group(pg)
        except Exception:
            logger.exception("ray: giving back a placement group failed")

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

    def _wake(self) -> None:
        self._dirty = True
        self._cond.notify_all()

    def _schedule_loop(self) -> None:
        while True:
            with self._cond:
                while not self._dirty and not self._closed:
                    waiting = any(s.queued() for s in self._schedulers.values())
                    if not self._cond.wait(REFRESH_S if waiting else None) and waiting:
                        break  # a periodic look at the cluster: nodes may have joined
                if self._closed:
                    return
                self._dirty = False
            try:
                self._refresh()
            except Exception:
                logger.exception("ray: reading the cluster's nodes failed")
            with self._cond:
                if self._closed:
                    return
                starts: list[tuple[str, Start]] = []
                for name, scheduler in self._schedulers.items():
                    starts.extend((name, start) for start in scheduler.schedule())
                for _, start in starts:
                    self._placing[start.request.allocation_id] = None
            for name, start in starts:
                self._place(name, start.request)

    # -------------------------------------------------------------------------------------------
    # placement

    def _place(self, pool_name: str, request: AllocationRequest) -> None:
        """Create the request's placement group and a thread that waits for it."""
        aid = request.allocation_id
        with self._cond:
            pool = self.config.pool(pool_name)
            per_node = self._per_node_locked(pool_name)
            bundles = _cluster.bundles(request.slots, self._slot_type, self._cpus_per_slot, pool)
        strategy = _cluster.strategy(request.slots, per_node)
        kwargs: dict[str, Any] = {"strategy": strategy, "name": f"det-{aid}"}
        if pool.labels:
            kwargs["bundle_label_selector"] = [dict(pool.labels) for _ in bundles]
        try:
            pg = self._ray.util.placement_group(bundles, **kwargs)
        except Exception:
            logger.exception("ray: creating the placement group of %s failed", aid)
            with self._cond:
                self._release_locked(aid)
            return
        with self._cond:
            if aid not in self._placing:  # released meanwhile
                threading.Thread(target=self._give_back, args=(None, pg), daemon=True).start()
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
        try:
            ray.get(ready)
            table = ray.util.placement_group_table(pg)
            groups = _cluster.group_bundles(table["bundles_to_node_id"])
            gpu_ids: dict[int, str] = {}
            if self._slot_type == "cuda":
                gpu_ids = self._probe_gpus(pg, len(table["bundles_to_node_id"]))
        except Exception:
            logger.exception("ray: the placement group of %s failed", aid)
            with self._cond:
                self._release_locked(aid)
            return
        with self._cond:
            addresses = {n.node_id: n.address for n in self._nodes}
        containers = []
        for node_id, indices in groups:
            if self._slot_type == "cuda":
                slot_ids = [int(gpu_ids[i]) if gpu_ids[i].isdigit() else i for i in indices]
            else:
                slot_ids = list(range(len(indices)))
            containers.append(
                Container(node_id, addresses.get(node_id, "127.0.0.1"), indices, slot_ids)
            )
        self._assign(request, pg, containers)

    def _probe_gpus(self, pg: Any, count: int) -> dict[int, str]:
        """The GPU each bundle reserved (Ray fixes it when the group is placed)."""
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        refs = [
            self._gpu_probe.options(
                num_cpus=0,
                num_gpus=1,
                scheduling_strategy=PlacementGroupSchedulingStrategy(
                    pg, placement_group_bundle_index=index
                ),
            ).remote()
            for index in range(count)
        ]
        return {index: ids[0] for index, ids in enumerate(self._ray.get(refs))}

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
                    threading.Thread(target=self._give_back, args=(None, pg), daemon=True).start()
                return
            del self._placing[aid]
            placed = Placed(aid, pg, containers)
            self._placed[aid] = placed
            self._assigned[aid] = assignment
        self._notify("allocation_assigned", request, assignment)

    def _notify(self, method: str, *args: Any) -> None:
        events = self._events
        if events is None:
            return
        try:
            getattr(events, method)(*args)
        except Exception:
            logger.exception("resource manager event %s%r failed", method, args[:1])

    # -------------------------------------------------------------------------------------------
    # processes

    def launch(self, spec: LaunchSpec) -> None:
        """Start the allocation's ranks on its nodes; the outcome arrives through the events."""
        aid = spec.allocation_id
        with self._cond:
            if self._closed:
                raise RuntimeError("the resource manager is closed")
            placed = self._placed.get(aid)
            if placed is None:
                raise ValueError(f"allocation_id {aid!r} is not assigned")
            if placed.runner is not None:
                raise ValueError(f"allocation_id {aid!r} was launched already")
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
            self._all_placed = [p for p in self._all_placed if not p.done.is_set()]
            self._all_placed.append(placed)
            placed.runner.start()

    def terminate(self, allocation_id: str) -> None:
        """SIGTERM to the process group of the allocation on every node."""
        self._signal(allocation_id, signal.SIGTERM)

    def kill(self, allocation_id: str) -> None:
        """SIGKILL to the process group of the allocation on every node."""
        self._signal(allocation_id, signal.SIGKILL)

    def _signal(self, allocation_id: str, signum: int) -> None:
        with self._cond:
            placed = self._placed.get(allocation_id)
            if placed is not None and placed.runner is not None:
                placed.send(signum)

    def reap_orphan(self, pid: int, *, allocation_id: str | None = None) -> bool:
        """Nothing to reap: the node actors belong to this master's Ray driver, so Ray ends them
        when a master dies, and each actor's watcher then kills its ranks. Always False."""
        return False

    # -------------------------------------------------------------------------------------------
    # description, validation, shutdown

    def slot_count(self) -> int:
        """Slots of the ``default`` pool in the alive nodes (as last seen)."""
        with self._cond:
            return sum(self._per_node_locked("default"))

    @property
    def slot_type(self) -> str:
        """``"cuda"`` or ``"cpu"``."""
        return self._slot_type

    def describe(self) -> dict[str, Any]:
        """``{"type": "ray", "address", "slots", "slot_type", "used", "queued", "running",
        "nodes", "pools"}`` from the last view of the cluster (no Ray call)."""
        with self._cond:
            pools = {}
            for name, scheduler in self._schedulers.items():
                pools[name] = {
                    "slots": scheduler.total_slots,
                    "used": scheduler.used_slots(),
                    "queued": len(scheduler.queued()),
                }
            default = self._schedulers.get("default")
            return {
                "type": "ray",
                "address": self.config.address,
                "slots": default.total_slots if default else 0,
                "slot_type": self._slot_type,
                "used": default.used_slots() if default else 0,
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

    def validate(
        self, slots: int, *, max_slots: int | None = None, resource_pool: str = "default"
    ) -> str | None:
        """Why a request for ``slots`` could never start on this Ray cluster, else ``None``.

        Reads the cluster afresh, so the numbers in the message are the current ones.
        """
        if not isinstance(slots, int) or isinstance(slots, bool) or slots < 0:
            return f"slots_per_trial must be an int >= 0, got {slots!r}"
        if slots == 0:
            return (
                "slots_per_trial 0: the Ray resource manager places trials on slots;"
                " ask for at least 1"
            )
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
            problem = self._too_big_locked(slots, resource_pool)
        if problem is None and max_slots is not None and slots > max_slots:
            problem = f"slots_per_trial {slots} exceeds resources.max_slots {max_slots}"
        return problem

    def close(self, timeout: float = 10.0) -> None:
        """Stop scheduling, kill every allocation's ranks, remove the placement groups, and
        disconnect from Ray when this resource manager connected."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            placed = list(self._all_placed)
            for item in self._placed.values():
                if item.runner is not None:
                    item.send(signal.SIGKILL)
            groups = [p.pg for p in self._placed.values()]
            groups += [pg for pg in self._placing.values() if pg is not None]
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        deadline = time.monotonic() + timeout
        for item in placed:
            item.done.wait(max(0.0, deadline - time.monotonic()))
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
