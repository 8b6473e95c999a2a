"""det-master on the Slurm resource manager, against the real single-node Slurm of ``slurm_cluster``
(4 CPUs; partitions ``debug`` (default, 4 slots) and ``other`` (2 CPUs a slot: 2 slots) over that node).

One master for the module; each test creates its own experiment and waits for its end: the Core API
distributed example as one Slurm job with 2 ranks, and an adaptive search whose trials queue behind
each other while the partition is full.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from e2e.harness import EXAMPLES, MasterAPI

from determined.client import APIError

pytestmark = pytest.mark.slow

CORE_API = EXAMPLES / "core_api"
TIMEOUT = 300


@pytest.fixture(scope="module")
def shared_master(slurm_cluster: Any, make_module_master: Any) -> Iterator[Any]:
    """A master whose trials run as jobs of the session's Slurm cluster."""
    shared = slurm_cluster.shared_dir
    master = make_module_master(
        resource_manager={
            "type": "slurm",
            "slurm_conf": str(slurm_cluster.conf),
            "job_storage_root": str(shared / "jobs"),
            "poll_interval": 0.5,
            # 2 CPUs a slot: the 4-CPU node gives "other" 2 slots
            "partition_overrides": {"other": {"cpus_per_slot": 2, "description": "2 CPUs a slot"}},
        },
        checkpoint_storage=str(shared / "checkpoints"),
    )
    yield master
    master.stop()


def _completed(api: MasterAPI, experiment_id: int) -> list[dict[str, Any]]:
    state = api.wait_experiment(experiment_id, timeout=TIMEOUT)
    assert state == "STATE_COMPLETED", api.debug(experiment_id)
    trials = api.trials(experiment_id)
    assert trials and all(t["state"] == "STATE_COMPLETED" for t in trials), api.debug(experiment_id)
    return trials


def test_partitions_are_pools_and_oversize_requests_are_refused(shared_master: Any) -> None:
    described = shared_master.rm.describe()
    assert described["type"] == "slurm" and described["default_pool"] == "debug"
    assert set(described["pools"]) == {"debug", "other"}
    assert described["pools"]["other"]["slots"] == 2
    assert (described["slots"], described["slot_type"]) == (4, "cpu")
    api = MasterAPI(shared_master.url)
    agents = api.get("/api/v1/agents")["agents"]
    assert {a["resourcePools"][0] for a in agents} >= {"debug", "other"}
    with pytest.raises(APIError) as info:
        api.create_experiment(
            CORE_API / "4_distributed.yaml",
            CORE_API,
            overrides={"resources": {"slots_per_trial": 5}},
        )
    assert info.value.status == 400
    assert "slots_per_trial 5 exceeds the 4 cpu slots of Slurm partition 'debug'" in str(
        info.value.message
    )
    with pytest.raises(APIError) as info:
        api.create_experiment(
            CORE_API / "0_start.yaml",
            CORE_API,
            overrides={"resources": {"resource_pool": "gpu-nodes"}},
        )
    assert info.value.status == 400 and "gpu-nodes" in str(info.value.message)


def test_core_api_distributed_example_runs_two_ranks_in_one_job(
    shared_master: Any, slurm_cluster: Any
) -> None:
    api = MasterAPI(shared_master.url)
    exp = api.create_experiment(
        CORE_API / "4_distributed.yaml",
        CORE_API,
        overrides={"resources": {"slots_per_trial": 2}},
    )
    (trial,) = _completed(api, exp)
    training = api.metrics(trial["id"], "training")
    assert training and all(api.values(m)["ranks"] == 2 for m in training)
    entries = api.log_entries(trial["id"])
    assert {0, 1} <= {e.get("rankId") for e in entries}, api.debug(exp)
    assert any("rank 1 of 2" in str(e.get("log")) for e in entries), api.debug(exp)
    checkpoints = api.get(f"/api/v1/trials/{trial['id']}/checkpoints")["checkpoints"]
    assert checkpoints and "model.json" in checkpoints[0]["resources"]


def test_adaptive_search_trials_queue_while_the_partition_is_full(
    shared_master: Any, slurm_cluster: Any
) -> None:
    """Trials of 1 slot in a 2-slot partition: two run, the others wait in det's queue (never more
    than two det jobs at once in Slurm), and every trial completes. The experiment's ``slurm``
    section (upstream's spelling) adds its ``sbatch_args`` to each trial's job."""
    rm = shared_master.rm
    marker = str(time.time_ns())
    seen = {"queued": 0, "running": 0, "slurm_running": 0}
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.1):
            pool = rm.queue_state()["other"]
            seen["queued"] = max(seen["queued"], len(pool["queued"]))
            seen["running"] = max(seen["running"], len(pool["running"]))
            states = slurm_cluster.job_states().values()
            seen["slurm_running"] = max(seen["slurm_running"], sum(s == "RUNNING" for s in states))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    api = MasterAPI(shared_master.url)
    try:
        exp = api.create_experiment(
            CORE_API / "3_hpsearch.yaml",
            CORE_API,
            overrides={
                "resources": {"slots_per_trial": 1, "resource_pool": "other"},
                "slurm": {"sbatch_args": [f"--comment=search-{marker}"]},
                "searcher": {
                    "name": "adaptive_asha",
                    "metric": "validation_loss",
                    "smaller_is_better": True,
                    "max_trials": 5,
                    "max_concurrent_trials": 5,
                    "time_metric": "batches",
                    "max_time": 40,
                    "max_length": 40,
                },
            },
        )
        trials = _completed(api, exp)
    finally:
        done.set()
        sampler.join()
    assert len(trials) == 5
    assert seen["queued"] >= 1, seen
    assert seen["running"] == 2 and seen["slurm_running"] <= 2, seen
    assert rm.describe()["used"] == 0
    # the experiment's `slurm.sbatch_args` went into every job of its trials
    jobs = slurm_cluster.run("squeue", "-h", "-t", "all", "-o", "%k").stdout.split()
    assert jobs.count(f"search-{marker}") == 5, jobs
