"""Create-to-first-log-line latency of a trial: the Slurm resource manager next to the local one.

Starts the tests' single-host Slurm cluster (``tests/slurm_cluster.py``: munged, slurmctld and
slurmd in a temporary directory; Debian's ``slurmctld slurmd munge`` packages) — or uses a real
cluster with ``--slurm-conf`` and ``--job-storage-root`` on its shared filesystem — and two masters
in this process, one on the ``slurm`` resource manager and one on the ``local`` one (the baseline,
measured in the same run). Each run creates an experiment whose entrypoint prints one line and
measures until that line is readable through the trial-logs API; the runs alternate between the two
masters. On Slurm the path includes ``sbatch``, Slurm's scheduling pass, the job's start (its
helper describing the nodes), staging the context on the shared filesystem, ``srun`` of the ranks
and the master tailing the job's output file.

    .venv/bin/python benchmarks/bench_slurm_first_log.py [--runs 10] [--slots 1]
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import sys
import tempfile
import time
from typing import Any

from _master import create_experiment, start_master, wait_completed, wait_for

ROOT = pathlib.Path(__file__).resolve().parents[1]


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
    parser.add_argument("--poll-interval", type=float, default=2.0, help="the RM's squeue interval")
    parser.add_argument("--slurm-conf", help="a real cluster's slurm.conf (default: start one)")
    parser.add_argument("--job-storage-root", help="with --slurm-conf: a dir on its shared fs")
    args = parser.parse_args()

    cluster = None
    if args.slurm_conf:
        conf = args.slurm_conf
        shared = pathlib.Path(args.job_storage_root or tempfile.mkdtemp(prefix="det-slurm-bench-"))
    else:
        sys.path.insert(0, str(ROOT / "tests"))
        from slurm_cluster import missing_reason, start_cluster

        reason = missing_reason()
        if reason:
            print(f"skipped: {reason}")
            return 0
        cluster = start_cluster()
        conf, shared = str(cluster.conf), cluster.shared_dir
    masters = []
    try:
        slurm_master, slurm_session = start_master(
            resource_manager={
                "type": "slurm",
                "slurm_conf": conf,
                "job_storage_root": str(shared / "jobs"),
                "poll_interval": args.poll_interval,
            },
            checkpoint_storage=str(shared / "checkpoints"),
        )
        masters.append(slurm_master)
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
        # one warm-up each: both import paths get cached
        _first_line_latency(slurm_session, config, context)
        _first_line_latency(local_session, config, context)
        on_slurm, on_local = [], []
        for _ in range(args.runs):
            on_slurm.append(_first_line_latency(slurm_session, config, context))
            on_local.append(_first_line_latency(local_session, config, context))
    finally:
        for master in masters:
            master.stop()
        if cluster is not None:
            cluster.stop()
    slurm_s, local_s = statistics.median(on_slurm), statistics.median(on_local)
    where = "real cluster" if args.slurm_conf else "1-node test cluster"
    print(f"trial create -> first log line, slots_per_trial {args.slots}, {args.runs} runs each:")
    print(
        f"  slurm RM ({where}): median {slurm_s * 1000:.0f} ms, max {max(on_slurm) * 1000:.0f} ms"
    )
    print(
        f"  local RM (baseline): median {local_s * 1000:.0f} ms, max {max(on_local) * 1000:.0f} ms"
    )
    print(f"ratio slurm/local: {slurm_s / local_s:.2f}x (+{(slurm_s - local_s) * 1000:.0f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
