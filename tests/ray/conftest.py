"""Fixtures for the Ray resource manager: one two-node Ray cluster on 127.0.0.1, shared by every
test that asks for it.

The cluster is heavy (a GCS, two raylets, their workers; 30 s to start on a loaded 2-core machine),
so a test process starts it when its first test needs it and shuts it down as soon as the next test
it runs does not (``pytest_runtest_teardown``): tests that follow each other share one cluster
whatever module they are in, and it does not idle beside the rest of the suite. (Grouping them onto
one xdist worker would save more starts, but ``--dist loadgroup`` of pytest-xdist 3.8 does nothing
under pytest 9: it renames ``item._nodeid``, which pytest 9 no longer reads.) Each test gets its
own master on the ``ray`` resource manager (``ray_master``). Ray's files go to a short temporary
directory (its unix socket paths must stay under the kernel's length limit) and every Ray process
binds 127.0.0.1.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import signal
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from process_tree import kill_if_still_children, process_parents

# Read by Ray when it is imported: with it, every Ray process binds 127.0.0.1 (not the machine's
# external address).
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

NODE_CPUS = 2
"""CPUs (so CPU slots) of each node: the two nodes together offer 4."""
POOL_RESOURCE = "det_pool_big"
"""A custom resource only the head node offers (2 units): the resource pool tests' ``big`` pool."""
HEALTH = {
    "health_check_initial_delay_ms": 0,
    "health_check_period_ms": 500,
    "health_check_failure_threshold": 4,
}
"""A lost node is noticed within a couple of seconds (Ray's defaults take ~30 s)."""
STARTS = 3
"""Tries at starting the cluster, or a replacement node, when Ray's node start-up times out."""


@dataclass
class RayCluster:
    """The running cluster: ``address`` for ``resource_manager.address``, the ``Cluster`` object
    (to add and remove nodes) and the worker node."""

    address: str
    cluster: Any
    worker: Any

    @property
    def head_node_id(self) -> str:
        return str(self.cluster.head_node.node_id)

    def replace_worker(self) -> None:
        """Kill the worker node's raylet and its processes (a lost node), then add a fresh one."""
        self.cluster.remove_node(self.worker, allow_graceful=False)
        self.worker = _add_worker(self.cluster)


def _add_worker(cluster: Any) -> Any:
    """A fresh worker node, retried when Ray's node start-up times out (it gives a raylet a fixed
    30 s to register, which a loaded 2-core machine once exceeded while a node was replaced). What a
    failed try started (this process's new children and their descendants: the raylet, its agents
    and workers) is killed first, so it cannot register late as a third node."""
    for attempt in range(STARTS):
        before = {pid for pid, parent in process_parents().items() if parent == os.getpid()}
        try:
            node = cluster.add_node(num_cpus=NODE_CPUS, node_ip_address="127.0.0.1")
            cluster.wait_for_nodes()
            return node
        except Exception as exc:
            parents = process_parents()
            doomed = {p for p, parent in parents.items() if parent == os.getpid()} - before
            while True:
                more = {p for p, parent in parents.items() if parent in doomed} - doomed
                if not more:
                    break
                doomed |= more
            kill_if_still_children(doomed, parents)
            if attempt + 1 == STARTS or "timed out during startup" not in str(exc):
                raise
    raise AssertionError("unreachable")


def _kill_processes_using(directory: str) -> None:
    """SIGKILL every process whose command line names ``directory`` (Ray's GCS, raylets, workers)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if directory.encode() in f.read():
                    os.kill(int(entry), signal.SIGKILL)
        except (OSError, ProcessLookupError):
            continue


def _start_cluster(temp: str) -> tuple[Any, Any]:
    """A head node and a worker node, retried when Ray's node start-up times out."""
    from ray.cluster_utils import Cluster

    for attempt in range(STARTS):
        cluster = None
        try:
            cluster = Cluster(
                initialize_head=True,
                head_node_args={
                    "num_cpus": NODE_CPUS,
                    "resources": {POOL_RESOURCE: NODE_CPUS},
                    "node_ip_address": "127.0.0.1",
                    "temp_dir": os.path.join(temp, "ray"),
                    "include_dashboard": False,
                    "_system_config": HEALTH,
                },
            )
            worker = cluster.add_node(num_cpus=NODE_CPUS, node_ip_address="127.0.0.1")
            cluster.wait_for_nodes()
            return cluster, worker
        except Exception as exc:
            # Ray gives a raylet a fixed 30 s to register ("The current node timed out during
            # startup"); on a loaded 2-core machine a whole module's tests failed on that once.
            if cluster is not None:
                cluster.shutdown()
            _kill_processes_using(temp)  # what a failed head start left running
            if attempt + 1 == STARTS or "timed out during startup" not in str(exc):
                raise
    raise AssertionError("unreachable")


class _SharedCluster:
    """The one cluster of this test process: started on first use, shut down by :meth:`close`."""

    def __init__(self) -> None:
        self.running: RayCluster | None = None
        self._temp = ""
        self._saved_tmpdir: str | None = None

    def get(self) -> RayCluster:
        if self.running is not None:
            return self.running
        ray = pytest.importorskip("ray")
        self._temp = tempfile.mkdtemp(prefix="det-ray-")
        self._saved_tmpdir = os.environ.get("RAY_TMPDIR")
        os.environ["RAY_TMPDIR"] = self._temp  # Cluster writes its address file under it
        os.makedirs(os.path.join(self._temp, "ray"), exist_ok=True)
        try:
            cluster, worker = _start_cluster(self._temp)
            self.running = RayCluster(cluster.address, cluster, worker)
            ray.init(address=cluster.address, namespace="det-tests", log_to_driver=False)
        except BaseException:
            self.close()
            raise
        return self.running

    def close(self) -> None:
        if not self._temp:
            return
        import ray

        if ray.is_initialized():
            ray.shutdown()
        if self.running is not None:
            self.running.cluster.shutdown()
            self.running = None
        if self._saved_tmpdir is None:
            os.environ.pop("RAY_TMPDIR", None)
        else:
            os.environ["RAY_TMPDIR"] = self._saved_tmpdir
        shutil.rmtree(self._temp, ignore_errors=True)
        self._temp = ""


_SHARED = _SharedCluster()


def _uses_cluster(item: pytest.Item | None) -> bool:
    return item is not None and "ray_cluster" in getattr(item, "fixturenames", ())


@pytest.hookimpl(trylast=True)  # after the test's own fixtures (its master) are torn down
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Shut the cluster down once the next test (if any) does not use it."""
    if _uses_cluster(item) and not _uses_cluster(nextitem):
        _SHARED.close()


@pytest.fixture
def ray_cluster() -> RayCluster:
    """The shared two-node cluster (started by the first test that asks for it)."""
    return _SHARED.get()


@pytest.fixture
def ray_master(
    ray_cluster: RayCluster, make_master: Any, tmp_path: pathlib.Path
) -> Callable[..., Any]:
    """``ray_master(**resource_manager_settings)``: a started master (the root conftest's
    ``make_master``) on the Ray cluster; its slots are the cluster's."""

    def make(**settings: Any) -> Any:
        section = {"type": "ray", "address": ray_cluster.address, **settings}
        section.setdefault("work_root", str(tmp_path / "nodes"))
        return make_master(resource_manager=section, slots=None)

    return make
