"""det-master on the Ray resource manager, against a real two-node Ray cluster on 127.0.0.1.

The shared cluster of tests/ray (``ray_cluster``: two nodes of 2 CPUs, so 4 CPU slots; the head
also offers the ``det_pool_big`` resource); each test starts its own master on it, or drives a
RayResourceManager directly. The node-loss test replaces the worker node (with a fresh one, so the
tests after it have the same two nodes), so it runs last here.
"""

from __future__ import annotations

import pathlib
import re
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from e2e.harness import EXAMPLES, MasterAPI

from determined.client import APIError
from determined.master.rm import AllocationRequest
from determined.master.rm.ray import RayResourceManager, parse_config
from determined.master.testing.rm_suite import SLEEPER, EventsRecorder, python_spec

pytestmark = pytest.mark.slow

CORE_API = EXAMPLES / "core_api"
TRIALS = pathlib.Path(__file__).resolve().parent / "trials"
TIMEOUT = 300


def _completed(api: MasterAPI, experiment_id: int) -> list[dict[str, Any]]:
    state = api.wait_experiment(experiment_id, timeout=TIMEOUT)
    assert state == "STATE_COMPLETED", api.debug(experiment_id)
    trials = api.trials(experiment_id)
    assert trials and all(t["state"] == "STATE_COMPLETED" for t in trials), api.debug(experiment_id)
    return trials


def test_oversize_request_refused_with_the_numbers(ray_master: Callable[..., Any]) -> None:
    api = MasterAPI(ray_master().url)
    with pytest.raises(APIError) as info:
        api.create_experiment(
            CORE_API / "4_distributed.yaml",
            CORE_API,
            overrides={"resources": {"slots_per_trial": 5}},
        )
    assert info.value.status == 400
    message = info.value.message
    assert "slots_per_trial 5 exceeds the 4 CPU slots of the Ray cluster" in message, message
    assert "2 node(s) with 2 + 2 slots" in message, message
    assert api.get("/api/v1/experiments")["experiments"] == []


def test_core_api_distributed_example_spans_both_nodes(ray_master: Callable[..., Any]) -> None:
    master = ray_master()
    api = MasterAPI(master.url)
    exp = api.create_experiment(
        CORE_API / "4_distributed.yaml", CORE_API, overrides={"resources": {"slots_per_trial": 4}}
    )
    (trial,) = _completed(api, exp)
    training = api.metrics(trial["id"], "training")
    assert training and all(api.values(m)["ranks"] == 4 for m in training)
    entries = api.log_entries(trial["id"])
    assert {e.get("rankId") for e in entries} >= {0, 1, 2, 3}
    # 4 slots on nodes of 2: ranks 0-1 on the chief's node, 2-3 on the other (local ranks 0-1 each)
    ready = {
        (int(m.group(1)), int(m.group(2)))
        for e in entries
        if (m := re.search(r"rank (\d) of 4 \(local rank (\d)\) ready", str(e.get("log"))))
    }
    assert ready == {(0, 0), (1, 1), (2, 0), (3, 1)}, ready


def test_torch_ddp_two_processes_on_two_nodes(ray_master: Callable[..., Any]) -> None:
    # 2 CPUs per slot: each node offers one slot, so the 2-slot trial must SPREAD.
    master = ray_master(cpus_per_slot=2)
    assert master.rm.describe()["slots"] == 2
    api = MasterAPI(master.url)
    config = {
        "name": "ddp-on-ray",
        "entrypoint": "python3 -m determined.launch.torch_distributed python3 ddp_train.py",
        "resources": {"slots_per_trial": 2},
        "searcher": {"name": "single", "metric": "validation_loss", "max_length": 20},
        "max_restarts": 0,
    }
    exp = api.create_experiment(config, TRIALS)
    (trial,) = _completed(api, exp)
    (last, *_) = reversed(api.metrics(trial["id"], "training"))
    values = api.values(last)
    assert values["world_size"] == 2 and values["nodes"] == 2, values
    assert values["weights_equal"] == 1.0
    logs = "\n".join(api.logs(trial["id"]))
    assert "ddp rank 0 of 2 on node 0" in logs and "ddp rank 1 of 2 on node 1" in logs, logs


def test_adaptive_search_runs_trials_concurrently(ray_master: Callable[..., Any]) -> None:
    master = ray_master()
    api = MasterAPI(master.url)
    most = 0
    stop = threading.Event()

    def watch() -> None:
        nonlocal most
        while not stop.is_set():
            most = max(most, master.rm.describe()["running"])
            time.sleep(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        exp = api.create_experiment(
            CORE_API / "3_hpsearch.yaml",
            CORE_API,
            overrides={
                "searcher": {
                    "name": "adaptive_asha",
                    "metric": "validation_loss",
                    "smaller_is_better": True,
                    "max_trials": 4,
                    "max_concurrent_trials": 4,
                    "time_metric": "batches",
                    "max_time": 40,
                    "max_length": 40,
                }
            },
        )
        trials = _completed(api, exp)
    finally:
        stop.set()
        watcher.join()
    assert len(trials) == 4
    assert most >= 2, f"at most {most} trial(s) ran at once"
    assert api.experiment(exp)["progress"] == pytest.approx(1.0)


def test_kill_reaches_every_rank_on_every_node(ray_master: Callable[..., Any]) -> None:
    import psutil

    master = ray_master()
    api = MasterAPI(master.url)
    config = {
        "name": "kill-me",
        "entrypoint": "python3 -m determined.launch.torch_distributed python3 resume.py",
        "resources": {"slots_per_trial": 4},
        "searcher": {"name": "single", "metric": "validation_loss", "max_length": 40},
        "max_restarts": 0,
    }
    exp = api.create_experiment(config, TRIALS)
    trial_id = api.wait_for(lambda: [t["id"] for t in api.trials(exp)], 60, "the trial")[0]
    api.wait_for(
        lambda: api.get(f"/api/v1/trials/{trial_id}/checkpoints")["checkpoints"],
        TIMEOUT,
        "a first checkpoint",
    )
    ranks = _allocation_processes(master.url, f"{exp}.")
    assert len([p for p in ranks if "resume.py" in " ".join(p.cmdline())]) >= 4
    api.post(f"/api/v1/experiments/{exp}/kill")
    assert api.wait_experiment(exp, timeout=60) == "STATE_CANCELED"
    _, alive = psutil.wait_procs(ranks, timeout=30)
    assert not alive, alive


def _allocation_processes(master_url: str, prefix: str) -> list[Any]:
    """This machine's processes of ``master_url`` whose DET_ALLOCATION_ID starts with ``prefix``
    (other masters on the machine, e.g. other test workers', number their experiments too)."""
    import psutil

    found = []
    for proc in psutil.process_iter():
        try:
            env = proc.environ()
            if env.get("DET_MASTER") == master_url and env.get("DET_ALLOCATION_ID", "").startswith(
                prefix
            ):
                found.append(proc)
        except (psutil.Error, OSError):
            continue
    return found


REPORT = (
    "import json, os\n"
    "info = json.load(open(os.environ['DET_CLUSTER_INFO']))\n"
    "print('node', os.environ['DET_AGENT_ID'], 'rank', info['rendezvous_info']['container_rank'],"
    " 'slots', info['slot_ids'])\n"
)


def test_pool_max_slots_and_processes(ray_cluster: Any, tmp_path: pathlib.Path) -> None:
    config = parse_config(
        {
            "type": "ray",
            "address": ray_cluster.address,
            "resource_pools": {"big": {"resource": "det_pool_big"}},
            "work_root": str(tmp_path / "nodes"),
        }
    )
    rm = RayResourceManager(config)
    events = EventsRecorder(120.0)
    rm.start(events)
    try:
        assert rm.describe()["pools"]["big"]["slots"] == 2
        assert rm.validate(4) is None
        problem = rm.validate(3, resource_pool="big")
        assert problem is not None and "exceeds the 2 CPU slots" in problem
        assert "resource pool 'big': 1 node(s) with 2 slots" in problem
        assert "resource_pool: no pool 'nope'" in str(rm.validate(1, resource_pool="nope"))

        now = time.time()
        first = AllocationRequest(
            "1.1.1", "1.1", "job-1", 2, max_slots=2, resource_pool="big", submitted_at=now
        )
        second = AllocationRequest(
            "1.2.1", "1.2", "job-1", 1, max_slots=2, resource_pool="big", submitted_at=now + 1
        )
        rm.submit(first)
        rm.submit(second)
        assignment = events.wait_assigned("1.1.1")
        assert assignment.container_slot_counts == [2] and assignment.slot_ids == [0, 1]
        rm.launch(python_spec(tmp_path, assignment, REPORT))
        assert events.wait_exited("1.1.1") == (0, None)
        messages = events.messages("1.1.1")
        # the pool's resource lives on the head node only
        assert messages == [f"node {ray_cluster.head_node_id} rank 0 slots [0, 1]"], messages
        # max_slots 2 of job-1 held the second request back until the first was released
        assert "1.2.1" not in events.assigned
        rm.release("1.1.1")
        assignment = events.wait_assigned("1.2.1")
        rm.launch(python_spec(tmp_path, assignment, SLEEPER))
        events.wait_logged("1.2.1", "ready")
        rm.terminate("1.2.1")
        assert events.wait_exited("1.2.1") == (-15, None)
        rm.release("1.2.1")
    finally:
        rm.close()
    assert not any((tmp_path / "nodes").iterdir())  # every node's copy of the context removed


def test_lost_node_restarts_trial_from_checkpoint(
    ray_master: Callable[..., Any], ray_cluster: Any
) -> None:
    master = ray_master()
    api = MasterAPI(master.url)
    config = {
        "name": "lose-a-node",
        "entrypoint": "python3 -m determined.launch.torch_distributed python3 resume.py",
        "resources": {"slots_per_trial": 4},
        "searcher": {"name": "single", "metric": "validation_loss", "max_length": 40},
        "max_restarts": 2,
    }
    exp = api.create_experiment(config, TRIALS)
    trial_id = api.wait_for(lambda: [t["id"] for t in api.trials(exp)], 60, "the trial")[0]

    def checkpointed() -> bool:
        checkpoints = api.get(f"/api/v1/trials/{trial_id}/checkpoints")["checkpoints"]
        return bool(checkpoints)

    api.wait_for(checkpointed, TIMEOUT, "a first checkpoint")
    ray_cluster.replace_worker()  # the worker's raylet and every process on it die
    (trial,) = _completed(api, exp)
    assert trial["restarts"] == 1, api.debug(exp)
    logs = "\n".join(api.logs(trial_id))
    assert "was lost" in logs, logs
    resumed = re.search(r"resumed from checkpoint \S+ at step (\d+)", logs)
    assert resumed and int(resumed.group(1)) >= 5, logs
    steps = api.steps(api.metrics(trial_id, "training"))
    assert steps[-1] == 40
