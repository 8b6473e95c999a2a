"""Create-to-exit latency of a trial that prints one line and exits, on a det master.

``det-master up`` runs in its own process (local resource manager, SQLite). For each run the
benchmark creates a single-trial experiment and measures from the create request until

- the master has noticed the exit: the trial's ``endTime`` (the master's clock; same machine), and
- a client sees it: the experiment's state is terminal (``GET /api/v1/experiments/{id}`` every 2 ms).

Two trials: ``plain`` (``print(...)`` and exit), and ``escaped`` (the same, after starting a child
in a session of its own that keeps the output pipes open, as a launcher's torchrun does; before
det noticed such exits by process wait and killed the allocation's escaped processes, this took
the 5 s pipe grace). Baseline in the same run: spawning the same interpreter on the same script and
waiting for it (the floor any launcher pays).

    .venv/bin/python benchmarks/bench_trial_exit.py [--runs 10]
"""

from __future__ import annotations

import argparse
import datetime
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

from _master import create_experiment, start_master_process, wait_for

PLAIN = "print('hello', flush=True)\n"
ESCAPED = (
    "import subprocess\n"
    "subprocess.Popen(['sleep', '60'], start_new_session=True)  # holds stdout/stderr\n"
    "print('hello', flush=True)\n"
)
TERMINAL = ("STATE_COMPLETED", "STATE_ERROR", "STATE_CANCELED")


def _timestamp(text: str) -> float:
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def measure(session: object, context: pathlib.Path, script: str, runs: int) -> dict[str, list]:
    config = {
        "name": f"trial-exit-{script}",
        "entrypoint": f"python3 {script}",
        "searcher": {"name": "single", "metric": "x", "max_length": 1},
        "max_restarts": 0,
    }
    seen, noticed = [], []
    for _ in range(runs):
        wall0, perf0 = time.time(), time.perf_counter()
        exp = create_experiment(session, config, context)  # type: ignore[arg-type]

        def done(exp: int = exp) -> str | None:
            state = session.request("GET", f"/api/v1/experiments/{exp}")["experiment"]["state"]  # type: ignore[attr-defined]
            return state if state in TERMINAL else None

        state = wait_for(done, timeout=60)
        seen.append(time.perf_counter() - perf0)
        assert state == "STATE_COMPLETED", state
        trial = session.request("GET", f"/api/v1/experiments/{exp}/trials")["trials"][0]  # type: ignore[attr-defined]
        noticed.append(_timestamp(trial["endTime"]) - wall0)
    return {"seen": seen, "noticed": noticed}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    proc, session = start_master_process("--slots", "2")
    context = pathlib.Path(tempfile.mkdtemp())
    (context / "plain.py").write_text(PLAIN)
    (context / "escaped.py").write_text(ESCAPED)
    try:
        results = {
            name: measure(session, context, f"{name}.py", args.runs)
            for name in ("plain", "escaped")
        }
    finally:
        proc.terminate()
        proc.wait(30)
    baseline = []
    for _ in range(args.runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, str(context / "plain.py")], capture_output=True, check=True)
        baseline.append(time.perf_counter() - start)
    base = statistics.median(baseline)
    print(f"baseline bare interpreter start + print + exit: median {base * 1000:.0f} ms")
    for name, r in results.items():
        seen, noticed = statistics.median(r["seen"]), statistics.median(r["noticed"])
        print(
            f"{name:8} create -> exit noticed by the master (endTime): median {noticed * 1000:.0f} ms;"
            f" seen by a client: median {seen * 1000:.0f} ms, max {max(r['seen']) * 1000:.0f} ms"
            f" ({args.runs} runs); ratio to baseline {seen / base:.1f}x"
        )
    plain = statistics.median(results["plain"]["seen"])
    print(f"target create -> exit seen < 200 ms (plain): {'met' if plain < 0.2 else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
