"""Garbage-collection pauses of a det master serving API reads, at det-master's young-generation
threshold against the one it used before (50,000), in the same run.

Each threshold gets a fresh process: an in-process master (``gc.freeze()`` after start-up and the
threshold set, as ``det-master up`` does), a finished experiment with one trial of ``--steps``
training reports, then ``--requests`` reads (the experiment list, the experiment's trials, the
trial, round robin) sent by a child process, so only the master's allocations reach the collector.
``gc.callbacks`` time every collection. Printed per threshold: collections, total time in the
collector, and the longest pause (the time every request in flight waits).

    .venv/bin/python benchmarks/bench_gc_pauses.py [--requests 900] [--steps 200]
"""

from __future__ import annotations

import argparse
import gc
import json
import pathlib
import subprocess
import sys
import tempfile
import time
from typing import Any

from _master import create_experiment, start_master, wait_completed

BASELINE = 50_000
"""det-master's young-generation threshold before this benchmark's change."""

CLIENT = """
import sys
from determined.client import Session
url, token, n, *paths = sys.argv[1:]
session = Session(url, token)
for i in range(int(n)):
    session.request("GET", paths[i % len(paths)])
"""

TRAIN = """
import determined as det
with det.core.init() as core:
    for op in core.searcher.operations():
        for step in range(1, int(det.get_cluster_info().trial.hparams["steps"]) + 1):
            core.train.report_training_metrics(steps_completed=step, metrics={"loss": 1.0 / step})
        op.report_completed(1.0)
"""


def _config(steps: int) -> dict[str, Any]:
    return {
        "name": "gc-pauses",
        "entrypoint": "python3 train.py",
        "hyperparameters": {"steps": steps},
        "searcher": {"name": "single", "metric": "loss", "max_length": 1},
        "resources": {"slots_per_trial": 0},
        "max_restarts": 0,
    }


def measure(threshold: int, requests: int, steps: int) -> dict[str, float]:
    """One threshold, in this process: collections, total and longest pause (ms)."""
    master, session = start_master(slots=1)
    try:
        context = pathlib.Path(tempfile.mkdtemp(prefix="det-bench-gc-"))
        (context / "train.py").write_text(TRAIN)
        exp = create_experiment(session, _config(steps), context)
        wait_completed(session, exp, timeout=300)
        trial = session.request("GET", f"/api/v1/experiments/{exp}/trials")["trials"][0]["id"]
        paths = [
            "/api/v1/experiments",
            f"/api/v1/experiments/{exp}/trials",
            f"/api/v1/trials/{trial}",
        ]
        gc.collect()
        gc.freeze()
        gc.set_threshold(threshold, 50, 100)
        pauses: list[float] = []
        began: list[float] = []

        def timer(phase: str, _info: dict[str, Any]) -> None:
            if phase == "start":
                began.append(time.perf_counter())
            else:
                pauses.append(time.perf_counter() - began.pop())

        gc.callbacks.append(timer)
        try:
            subprocess.run(
                [
                    sys.executable,
                    "-c",
                    CLIENT,
                    master.url,
                    str(session.token),
                    str(requests),
                    *paths,
                ],
                check=True,
            )
        finally:
            gc.callbacks.remove(timer)
        return {
            "collections": len(pauses),
            "total_ms": 1000 * sum(pauses),
            "max_ms": 1000 * max(pauses, default=0.0),
        }
    finally:
        master.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=900)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--threshold", type=int, help=argparse.SUPPRESS)  # one child run
    args = parser.parse_args()
    if args.threshold is not None:
        print(json.dumps(measure(args.threshold, args.requests, args.steps)))
        return
    from determined.master.__main__ import GC_THRESHOLD

    rows = {}
    for threshold in (GC_THRESHOLD[0], BASELINE):
        out = subprocess.run(
            [
                sys.executable,
                __file__,
                "--threshold",
                str(threshold),
                "--requests",
                str(args.requests),
                "--steps",
                str(args.steps),
            ],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        rows[threshold] = json.loads(out.strip().splitlines()[-1])
    print(f"{args.requests} API reads; young-generation threshold: det-master's vs {BASELINE:,}")
    print("| threshold | collections | time in the collector | longest pause |")
    print("|---|---|---|---|")
    for threshold, row in rows.items():
        print(
            f"| {threshold:,} | {row['collections']:.0f} | {row['total_ms']:.0f} ms |"
            f" {row['max_ms']:.1f} ms |"
        )
    base, ours = rows[BASELINE], rows[GC_THRESHOLD[0]]
    print(
        f"longest pause ratio {ours['max_ms'] / max(base['max_ms'], 1e-9):.2f}x, "
        f"collector time ratio {ours['total_ms'] / max(base['total_ms'], 1e-9):.2f}x"
    )


if __name__ == "__main__":
    main()
