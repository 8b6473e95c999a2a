"""Metric rows ingested per second by a det master with 100 concurrently reporting trials (SQLite).

The master runs as its own process (`det-master up`). 100 trials run (an experiment of 100 zero-slot trials whose processes just wait), and 100 reporter
threads play their metrics shippers: each sends batches of reports to its own trial, as
``core_context.train.report_training_metrics`` does from its background thread. Reported: rows/s with
batches (det's shipper) and, as the baseline in the same run, rows/s with one report per request (what
upstream's client does), plus p50/p99 latency of the metrics endpoint under the load.

    .venv/bin/python benchmarks/bench_metrics_ingest.py [--trials 100] [--seconds 10] [--batch 100]
"""

from __future__ import annotations

import argparse
import http.client
import json
import pathlib
import statistics
import sys
import tempfile
import threading
import time

from _master import create_experiment, start_master_process, wait_for

from determined.client import metrics_body


def _bodies(trial_id: int, run_id: int, batch: int, count: int) -> list[bytes]:
    """``count`` request bodies for one trial, encoded up front (a trial encodes in its own process)."""
    bodies = []
    for n in range(count):
        reports = [
            metrics_body(
                trial_id, run_id, "training", {"loss": 1.0 / (s + 1), "lr": 0.1, "acc": 0.5}, s
            )
            for s in range(n * batch + 1, (n + 1) * batch + 1)
        ]
        body = {"reports": reports} if batch > 1 else reports[0]
        bodies.append(json.dumps(body).encode())
    return bodies


def run_load(
    url: str, token: str, trials: list[tuple[int, int]], seconds: float, batch: int
) -> tuple[int, list[float]]:
    """Each trial's thread posts pre-encoded bodies over one keep-alive connection for ``seconds``."""
    host, port = url.removeprefix("http://").split(":")
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    bodies = {t: _bodies(t, r, batch, 8) for t, r in trials}
    rows = [0] * len(trials)
    latencies: list[list[float]] = [[] for _ in trials]
    stop = time.monotonic() + seconds
    errors: list[BaseException] = []

    def reporter(index: int, trial_id: int) -> None:
        path = f"/api/v1/trials/{trial_id}/metrics" + ("/batch" if batch > 1 else "")
        connection = http.client.HTTPConnection(host, int(port), timeout=120)
        n = 0
        try:
            while time.monotonic() < stop:
                start = time.perf_counter()
                connection.request("POST", path, body=bodies[trial_id][n % 8], headers=headers)
                response = connection.getresponse()
                response.read()
                if response.status != 200:
                    raise RuntimeError(f"{path}: {response.status}")
                latencies[index].append(time.perf_counter() - start)
                rows[index] += batch
                n += 1
        except BaseException as exc:  # reported after the run
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=reporter, args=(i, t)) for i, (t, _) in enumerate(trials)]
    began = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - began
    if errors:
        raise errors[0]
    return int(sum(rows) / elapsed), [x for per in latencies for x in per]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--batch", type=int, default=100)
    args = parser.parse_args()

    master, session = start_master_process("--slots", "1")
    try:
        context = pathlib.Path(tempfile.mkdtemp())
        (context / "wait.py").write_text("import time\ntime.sleep(3600)\n")
        config = {
            "name": "ingest-bench",
            "entrypoint": "python3 wait.py",
            "searcher": {
                "name": "random",
                "metric": "loss",
                "max_trials": args.trials,
                "max_concurrent_trials": args.trials,
            },
            "hyperparameters": {"x": {"type": "double", "minval": 0, "maxval": 1}},
            "resources": {"slots_per_trial": 0},
            "max_restarts": 0,
        }
        exp = create_experiment(session, config, context)

        def running() -> list[tuple[int, int]] | None:
            trials = session.request(
                "GET", f"/api/v1/experiments/{exp}/trials", params={"limit": 500}
            )["trials"]
            ready = [
                (int(t["id"]), int(t["trialRunId"]))
                for t in trials
                if t["state"] in ("STATE_ACTIVE", "STATE_RUNNING")
            ]
            return ready if len(ready) == args.trials else None

        trials = wait_for(running, timeout=300, interval=0.2)
        url = session.master_url
        batched, batch_latencies = run_load(
            url, session.token or "", trials, args.seconds, args.batch
        )
        single, single_latencies = run_load(url, session.token or "", trials, args.seconds, 1)
        session.request("POST", f"/api/v1/experiments/{exp}/kill")

    finally:
        master.terminate()
        master.wait(timeout=60)

    def pct(values: list[float], q: float) -> float:
        return sorted(values)[int(q * (len(values) - 1))] * 1000

    print(f"{args.trials} reporting trials, {args.seconds:.0f} s each mode, SQLite")
    print(
        f"det shipper batches of {args.batch}: {batched:,} rows/s; request latency "
        f"p50 {pct(batch_latencies, 0.5):.1f} ms, p99 {pct(batch_latencies, 0.99):.1f} ms"
    )
    print(
        f"baseline one report per request: {single:,} rows/s; request latency "
        f"p50 {pct(single_latencies, 0.5):.1f} ms, p99 {pct(single_latencies, 0.99):.1f} ms "
        f"(median {statistics.median(single_latencies) * 1000:.1f} ms)"
    )
    print(
        f"ratio batched/single: {batched / max(single, 1):.1f}x; target >= 50,000 rows/s: "
        f"{'met' if batched >= 50_000 else 'MISSED'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
