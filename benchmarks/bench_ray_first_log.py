"""Create-to-first-log-line latency of a trial: the Ray resource manager next to the local one.

Starts a two-node Ray cluster on 127.0.0.1 (``ray.cluster_utils.Cluster``, 2 CPUs per node) and two
masters in this process, one on the ``ray`` resource manager and one on the ``local`` one (the
baseline, measured in the same run). Each run creates an experiment whose entrypoint prints one line
and measures until that line is readable through the trial-logs API; the runs alternate between the
two masters. On Ray the path includes the placement group, a node actor per node, shipping the
context through the object store and the log long-poll.

    .venv/bin/python benchmarks/bench_ray_first_log.py [--runs 10] [--slots 1]

``--slots 4`` makes the Ray trial span both nodes (two actors); the local trial takes 4 CPU slots.
"""

from __future__ import annotations

import os

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # read when Ray is imported

import argparse
import pathlib
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any

from _master import create_experiment, start_master, wait_completed, wait_for


def _first_line_latency(session: Any, config: dict[str, Any], context: pathlib.Path) -> float:
    start = time.perf_counter()
    exp = create_experiment(session, config, context)

    def first_line() -> bool:
        trials = session.request("GET", f"/api/v1/experiments/{exp}/trials")["trials"]
        if not trials:
            return False
        lines = session.stream(f"/api/v1/trials/{trials[0]['id']}/logs")
        return any("first line" in str(line.get("log", "")) for line in lines)

    wait_for(first_line, timeout=120)
    latency = time.perf_counter() - start
    wait_completed(session, exp, timeout=120)
    return latency


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--slots", type=int, default=1)
    args = parser.parse_args()

    import ray
    from ray.cluster_utils import Cluster

    temp = tempfile.mkdtemp(prefix="det-ray-bench-")
    os.environ["RAY_TMPDIR"] = temp
    os.makedirs(os.path.join(temp, "ray"), exist_ok=True)
    node = {"num_cpus": 2, "node_ip_address": "127.0.0.1"}
    cluster = Cluster(
        initialize_head=True,
        head_node_args={**node, "temp_dir": os.path.join(temp, "ray"), "include_dashboard": False},
    )
    cluster.add_node(**node)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False)
    masters = []
    try:
        ray_master, ray_session = start_master(
            resource_manager={"type": "ray", "address": cluster.address}
        )
        masters.append(ray_master)
        local_master, local_session = start_master(slots=4)
        masters.append(local_master)
        context = pathlib.Path(tempfile.mkdtemp(prefix="det-bench-ctx-"))
        (context / "hello.py").write_text("print('first line', flush=True)\n")
        config = {
            "name": "first-log",
            "entrypoint": "python3 hello.py",
            "resources": {"slots_per_trial": args.slots},
            "searcher": {"name": "single", "metric": "x"},
            "max_restarts": 0,
        }
        # one warm-up each: Ray starts its worker processes, both import paths get cached
        _first_line_latency(ray_session, config, context)
        _first_line_latency(local_session, config, context)
        on_ray, on_local = [], []
        for _ in range(args.runs):
            on_ray.append(_first_line_latency(ray_session, config, context))
            on_local.append(_first_line_latency(local_session, config, context))
    finally:
        for master in masters:
            master.stop()
        ray.shutdown()
        cluster.shutdown()
        shutil.rmtree(temp, ignore_errors=True)
    ray_s, local_s = statistics.median(on_ray), statistics.median(on_local)
    print(f"trial create -> first log line, slots_per_trial {args.slots}, {args.runs} runs each:")
    print(
        f"  ray   RM (2-node cluster): median {ray_s * 1000:.0f} ms, max {max(on_ray) * 1000:.0f} ms"
    )
    print(
        f"  local RM (baseline):       median {local_s * 1000:.0f} ms, max {max(on_local) * 1000:.0f} ms"
    )
    print(f"ratio ray/local: {ray_s / local_s:.2f}x (+{(ray_s - local_s) * 1000:.0f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
