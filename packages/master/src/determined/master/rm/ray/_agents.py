"""The master's node agents: one long-lived :class:`NodeAgent` actor per Ray node, made on demand.

An agent is pinned to its node (``NodeAffinitySchedulingStrategy``, not soft) and takes no
resources: the trial's placement group holds the slots, the agent only runs the ranks. It belongs
to the master's Ray driver, so Ray ends it with the master. An agent found dead (its node lost) is
forgotten and made afresh on the next use.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from determined.master.rm.ray._node import NodeAgent

logger = logging.getLogger("determined.master.rm")

AGENT_CONCURRENCY = 256
"""Calls one agent serves at once: a long ``poll`` per allocation on the node, plus signals."""
SHUTDOWN_S = 10.0


class Agents:
    """Node id → that node's agent handle."""

    def __init__(self, ray: Any, work_root: str | None, runtime_env: dict[str, Any] | None) -> None:
        self._ray = ray
        self._cls = ray.remote(NodeAgent)
        self._work_root = work_root
        self._runtime_env = runtime_env
        self._handles: dict[str, Any] = {}
        self._lock = threading.Lock()

    def get(self, node_id: str) -> Any:
        """The agent of ``node_id``, created (asynchronously, by Ray) when there is none."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        with self._lock:
            handle = self._handles.get(node_id)
            if handle is None:
                options: dict[str, Any] = {
                    "num_cpus": 0,
                    "max_concurrency": AGENT_CONCURRENCY,
                    "scheduling_strategy": NodeAffinitySchedulingStrategy(node_id, soft=False),
                }
                if self._runtime_env:
                    options["runtime_env"] = self._runtime_env
                handle = self._cls.options(**options).remote(self._work_root)
                self._handles[node_id] = handle
            return handle

    def forget(self, node_id: str, handle: Any) -> None:
        """Drop a dead agent (only if it is still the one on record)."""
        with self._lock:
            if self._handles.get(node_id) is handle:
                del self._handles[node_id]

    def close(self) -> None:
        """Kill every allocation's ranks through the agents, then the agents themselves."""
        with self._lock:
            handles = list(self._handles.values())
            self._handles.clear()
        refs = []
        for handle in handles:
            try:
                refs.append(handle.shutdown.remote())
            except Exception:
                logger.debug("ray: an agent's shutdown call failed", exc_info=True)
        if refs:
            try:
                self._ray.wait(refs, num_returns=len(refs), timeout=SHUTDOWN_S)
            except Exception:
                logger.debug("ray: waiting for the agents failed", exc_info=True)
        for handle in handles:
            try:
                self._ray.kill(handle, no_restart=True)
            except Exception:
                logger.debug("ray: killing an agent failed", exc_info=True)
