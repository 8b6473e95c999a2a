"""Create-to-first-log-line latency of a trial on a det master.

Creates an experiment whose entrypoint prints one line, and measures from the create request until that
line is readable through the trial-logs API. Baseline in the same run: spawning the same interpreter
and reading its first line directly (the floor any launcher pays).

    .venv/bin/python benchmarks/bench_first_log.py [--runs 10]
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

from _master import create_experiment, start_master, wait_for


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    master, session = start_master(slots=2)
    context = pathlib.Path(tempfile.mkdtemp())
    (context / "hello.py").write_text("print('first line', flush=True)\n")
    config = {
        "name": "first-log",
        "entrypoint": "python3 hello.py",
        "searcher": {"name": "single", "metric": "x"},
        "max_restarts": 0,
    }

    latencies = []
    for _ in range(args.runs):
        start = time.perf_counter()
        exp = create_experiment(session, config, context)

        def first_line(exp: int = exp) -> bool:
            trials = session.request("GET", f"/api/v1/experiments/{exp}/trials")["trials"]
            if not trials:
                return False
            lines = session.stream(f"/api/v1/trials/{trials[0]['id']}/logs")
            return any("first line" in str(line.get("log", "")) for line in lines)

        wait_for(first_line, timeout=60)
        latencies.append(time.perf_counter() - start)
    baseline = []
    for _ in range(args.runs):
        start = time.perf_counter()
        out = subprocess.run(
            [sys.executable, str(context / "hello.py")], capture_output=True, text=True
        )
        assert "first line" in out.stdout
        baseline.append(time.perf_counter() - start)
    master.stop()
    det_s = statistics.median(latencies)
    base_s = statistics.median(baseline)
    print(
        f"create -> first log line: median {det_s * 1000:.0f} ms, max {max(latencies) * 1000:.0f} ms "
        f"over {args.runs} experiments"
    )
    print(f"baseline bare interpreter start + first line: median {base_s * 1000:.0f} ms")
    print(
        f"ratio det/baseline: {det_s / base_s:.1f}x; target < 1.5 s: {'met' if det_s < 1.5 else 'MISSED'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
