"""Running one placed allocation on its Ray nodes: the node agents run the ranks, logs come back.

The runner thread of an allocation asks the agent (``_node.NodeAgent``) of every node of its
placement to run that node's ranks. It ships the context (one object in Ray's object store, fetched by
every node), gives each node its own ClusterInfo (``container_rank``, that node's ``slot_ids``),
starts the ranks, then keeps one ``poll`` call outstanding per node and turns the answers into
``allocation_log`` batches. The first node whose ranks fail, or whose actor dies (a lost node),
gets every other node killed, so a gang never runs on with a missing member; the master then sees
one ``allocation_exited`` and its restart logic resumes the trial from its latest checkpoint.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from determined.master.rm._types import LaunchSpec, LogLine, parse_log_line
from determined.master.rm.ray._node import pack_directory

logger = logging.getLogger("determined.master.rm")

POLL_S = 5.0
"""Longest a ``poll`` call waits for output inside the actor."""
CLEANUP_S = 10.0


@dataclass
class Container:
    """One node of an allocation: its bundles, address and (after launch) its node's agent."""

    node_id: str
    address: str
    bundle_indices: list[int]
    slot_ids: list[int]
    actor: Any = None


@dataclass
class Placed:
    """An allocation whose placement group is ready."""

    allocation_id: str
    pg: Any
    containers: list[Container]
    signal: int | None = None
    runner: threading.Thread | None = None
    done: threading.Event = field(default_factory=threading.Event)

    def send(self, signum: int) -> None:
        """Signal every started actor; remembered for actors not created yet (SIGKILL sticks)."""
        if self.signal != signal.SIGKILL:
            self.signal = signum
        for container in self.containers:
            if container.actor is not None:
                container.actor.signal.remote(self.allocation_id, signum)


ALWAYS_SHIPPED = ("PYTHONUNBUFFERED",)


def task_environment(spec_env: dict[str, str]) -> tuple[dict[str, str], str]:
    """The variables the master set for the task, and what it put before PATH.

    A node keeps its own environment (its HOME, locale, ...) under the task's variables: those
    differing from the master's own environment, every ``DET_*`` and ``PYTHONUNBUFFERED``.
    """
    own = os.environ
    env = {
        k: v
        for k, v in spec_env.items()
        if k != "PATH" and (own.get(k) != v or k.startswith("DET_") or k in ALWAYS_SHIPPED)
    }
    path = spec_env.get("PATH", "")
    own_path = own.get("PATH", "")
    prefix = ""
    if path != own_path:
        prefix = (
            path[: -len(own_path)].rstrip(os.pathsep)
            if own_path and path.endswith(own_path)
            else path
        )
    return env, prefix


def node_cluster_info(base: dict[str, Any], rank: int, container: Container) -> dict[str, Any]:
    """The ClusterInfo of one node: the master's, with this node's rank, slots and id."""
    info = copy.deepcopy(base)
    rendezvous = info.get("rendezvous_info") or {}
    rendezvous["container_rank"] = rank
    info["rendezvous_info"] = rendezvous
    info["slot_ids"] = list(container.slot_ids)
    info["agent_id"] = container.node_id
    return info


def _error_text(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[-1] if text else type(exc).__name__


class Runner:
    """Runs ``placed`` for ``spec`` and reports through ``notify(method, *args)``."""

    def __init__(
        self,
        ray: Any,
        agents: Any,
        placed: Placed,
        spec: LaunchSpec,
        notify: Any,
        lock: threading.Condition,
        cuda: bool,
    ) -> None:
        self.ray = ray
        self.agents = agents
        self.placed = placed
        self.spec = spec
        self.notify = notify
        self.lock = lock
        self.cuda = cuda

    def run(self) -> None:
        """The runner thread's body: exactly one ``allocation_exited`` at the end."""
        aid = self.placed.allocation_id
        try:
            pids = self._start()
        except _StartFailed as failure:
            self._cleanup()
            if failure.error is not None:
                line = LogLine(time.time(), "stderr", None, "LOG_LEVEL_ERROR", failure.error)
                self.notify("allocation_log", aid, [line])
            self.notify("allocation_exited", aid, failure.exit_code, failure.error)
            self.placed.done.set()
            return
        except Exception as exc:  # a bug or an unexpected Ray failure: still end the allocation
            logger.exception("allocation %s: launch on Ray failed", aid)
            self._cleanup()
            self.notify("allocation_exited", aid, None, f"launch on Ray failed: {exc}")
            self.placed.done.set()
            return
        self.notify("allocation_started", aid, pids[0])
        exit_code, error = self._follow()
        self._cleanup()
        self.notify("allocation_exited", aid, exit_code, error)
        self.placed.done.set()

    # -- start ---------------------------------------------------------------------------------

    def _start(self) -> list[int]:
        ray = self.ray
        spec = self.spec
        aid = self.placed.allocation_id
        info_path = spec.env.get("DET_CLUSTER_INFO")
        base_info: dict[str, Any] = {}
        if info_path and os.path.exists(info_path):
            with open(info_path) as f:
                base_info = json.load(f)
        context = ray.put(pack_directory(spec.cwd))
        task_env, path_prefix = task_environment(spec.env)
        hook = None
        if spec.startup_hook:
            hook = os.path.relpath(spec.startup_hook, spec.cwd)
        with self.lock:
            for container in self.placed.containers:
                container.actor = self.agents.get(container.node_id)
            pending = self.placed.signal
        if pending is not None:
            self.placed.send(pending)
        containers = self.placed.containers
        if len(containers) > 1:
            # Many nodes: the chief's rendezvous and collective ports, held on the chief's node by
            # its agent until the allocation's cleanup (fixed defaults would collide between
            # trials sharing a node; ports picked free could be taken before the ranks bind them).
            chief = containers[0].actor
            ports = self._get(containers[0], chief.hold_rendezvous_ports.remote(aid))
            for name, value in ports.items():
                task_env.setdefault(name, value)
        starts = []
        for rank, container in enumerate(containers):
            env = dict(task_env)
            if self.cuda:
                env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in container.slot_ids)
            starts.append(
                container.actor.start.remote(
                    aid,
                    rank,
                    context,
                    node_cluster_info(base_info, rank, container),
                    list(spec.argv),
                    env,
                    path_prefix,
                    hook,
                )
            )
        pids = []
        for rank, (container, ref) in enumerate(zip(containers, starts, strict=True)):
            try:
                pids.append(int(ray.get(ref)))
            except Exception as exc:
                if self._actor_lost(exc):
                    self.agents.forget(container.node_id, container.actor)
                self.placed.send(signal.SIGKILL)
                if self.placed.signal == signal.SIGKILL and not self._actor_lost(exc):
                    raise _StartFailed(-signal.SIGKILL, None) from None
                raise _StartFailed(
                    None,
                    f"{self._where(rank, container)}: could not start {spec.argv[0]!r}:"
                    f" {_error_text(exc)}",
                ) from None
        return pids

    def _get(self, container: Container, ref: Any) -> Any:
        try:
            return self.ray.get(ref)
        except Exception as exc:
            if self._actor_lost(exc):
                self.agents.forget(container.node_id, container.actor)
            raise _StartFailed(None, f"{self._where(0, container)}: {_error_text(exc)}") from None

    def _actor_lost(self, exc: BaseException) -> bool:
        from ray.exceptions import RayActorError

        return isinstance(exc, RayActorError)

    @staticmethod
    def _where(rank: int, container: Container) -> str:
        return f"container {rank} on Ray node {container.address} ({container.node_id[:12]})"

    # -- follow --------------------------------------------------------------------------------

    def _follow(self) -> tuple[int | None, str | None]:
        ray = self.ray
        aid = self.placed.allocation_id
        containers = self.placed.containers
        outstanding = {c.actor.poll.remote(aid, POLL_S): rank for rank, c in enumerate(containers)}
        exit_code: int | None = None
        error: str | None = None
        while outstanding:
            ready, _ = ray.wait(list(outstanding), num_returns=1)
            ref = ready[0]
            rank = outstanding.pop(ref)
            container = containers[rank]
            try:
                raw_lines, code = ray.get(ref)
            except Exception as exc:
                if self._actor_lost(exc):
                    self.agents.forget(container.node_id, container.actor)
                if error is None and exit_code is None:
                    if self._actor_lost(exc):
                        error = f"{self._where(rank, container)} was lost: {_error_text(exc)}"
                    else:
                        error = f"{self._where(rank, container)} failed: {_error_text(exc)}"
                    logger.warning("allocation %s: %s", aid, error)
                    line = LogLine(time.time(), "stderr", None, "LOG_LEVEL_ERROR", error)
                    self.notify("allocation_log", aid, [line])
                    self.placed.send(signal.SIGKILL)
                continue
            if raw_lines:
                lines = [parse_log_line(text, stdtype, ts) for ts, stdtype, text in raw_lines]
                self.notify("allocation_log", aid, lines)
            if code is None:
                outstanding[container.actor.poll.remote(aid, POLL_S)] = rank
                continue
            if code != 0 and exit_code is None and error is None:
                exit_code = code
                if len(containers) > 1:
                    self.placed.send(signal.SIGKILL)  # the gang is broken: end every node
        if error is not None:
            return None, error
        return (exit_code if exit_code is not None else 0), None

    def _cleanup(self) -> None:
        refs = []
        for container in self.placed.containers:
            if container.actor is not None:
                refs.append(container.actor.cleanup.remote(self.placed.allocation_id))
        if refs:
            try:
                self.ray.wait(refs, num_returns=len(refs), timeout=CLEANUP_S)
            except Exception:
                logger.debug("allocation %s: cleanup failed", self.placed.allocation_id)


class _StartFailed(Exception):
    def __init__(self, exit_code: int | None, error: str | None) -> None:
        super().__init__(error)
        self.exit_code = exit_code
        self.error = error
