"""A trial spanning two Slurm nodes: two slurmd daemons on this host (nodes of 2 CPUs), one job of
4 tasks spread 2 + 2, one container per node started by ``srun``, the chief's rendezvous port handed
to the other node through the job directory."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from e2e.harness import EXAMPLES, MasterAPI
from slurm_cluster import missing_reason, start_cluster

pytestmark = pytest.mark.slow

CORE_API = EXAMPLES / "core_api"


@pytest.fixture(scope="module")
def two_nodes() -> Iterator[Any]:
    reason = missing_reason()
    if reason:
        pytest.skip(reason)
    cluster = start_cluster(nodes=2, cpus=2, partitions=("debug",))
    try:
        yield cluster
    finally:
        cluster.stop()


def test_distributed_example_spans_two_nodes(two_nodes: Any, make_master: Any) -> None:
    shared = two_nodes.shared_dir
    master = make_master(
        resource_manager={
            "type": "slurm",
            "slurm_conf": str(two_nodes.conf),
            "job_storage_root": str(shared / "jobs"),
            "poll_interval": 0.5,
        },
        checkpoint_storage=str(shared / "checkpoints"),
    )
    pool = master.rm.describe()["pools"]["debug"]
    assert (pool["nodes"], pool["slots"]) == (2, 4)
    api = MasterAPI(master.url)
    exp = api.create_experiment(
        CORE_API / "4_distributed.yaml", CORE_API, overrides={"resources": {"slots_per_trial": 4}}
    )
    state = api.wait_experiment(exp, timeout=300)
    assert state == "STATE_COMPLETED", api.debug(exp)
    (trial,) = api.trials(exp)
    training = api.metrics(trial["id"], "training")
    assert training and all(api.values(m)["ranks"] == 4 for m in training)
    entries = api.log_entries(trial["id"])
    assert {0, 1, 2, 3} <= {e.get("rankId") for e in entries}, api.debug(exp)
