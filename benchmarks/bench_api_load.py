"""API reads under load: 50 concurrent readers while 20 trials report metrics, against the same
readers on the idle master (same run, same data). Per route: throughput and p50/p99 latency, idle
vs loaded, and the ratio loaded/idle. Target: p99 < 250 ms for every read route under load.

One ``det-master up`` process (SQLite by default, ``--db URL`` for PostgreSQL). First a finished
"history" experiment is stored (one trial with ``--history-steps`` training reports) so the metric
reads have something to return. Then the readers run for ``--seconds`` against the idle master,
then 20 real trial processes start reporting (one training report every ``--interval`` seconds each,
through det's metrics shipper) and, once every trial has reported, the readers run again for
``--seconds``. Readers are ``--procs`` processes of ``--readers / --procs`` threads each, so the
load generator's own GIL does not stand in for the master's latency. Each reader loops over the
routes: the experiment list, an experiment's trials, a trial, and a trial's training metrics, waiting
``--think`` seconds between requests (default 1 s: a client polling once a second, as a web UI page or
a watch loop does; ``--think 0`` makes every reader a closed loop, which measures saturation: latency is
then readers / throughput, whatever the master's speed). Each wait is drawn uniformly from
``think * (1 +- jitter)`` (default 0.5, the same mean), as independent clients differ: with one fixed
wait for all (``--jitter 0``), the first pause of the master (a garbage collection) left every reader
waiting on it, after which all 50 sent their next request at the same instant, every 1.3 s for the rest
of the run: a benchmark of 50-request bursts, not of 50 clients.

    .venv/bin/python benchmarks/bench_api_load.py [--readers 50] [--trials 20] [--seconds 15]
        [--interval 0.05] [--history-steps 2000] [--procs 5] [--think 1.0] [--jitter 0.5]
        [--db URL]
"""

from __future__ import annotations

import argparse
import multiprocessing
import pathlib
import random
import tempfile
import threading
import time
from typing import Any

import requests
from _master import create_experiment, start_master_process, wait_completed, wait_for

from determined.client import Session

TARGET_P99_MS = 250.0

TRAIN = """
import time

import determined as det

hp = det.get_cluster_info().trial.hparams
with det.core.init() as core:
    step = 0
    for op in core.searcher.operations():
        end = time.time() + float(hp["seconds"])
        while step < int(hp["steps"]) or (int(hp["steps"]) == 0 and time.time() < end):
            step += 1
            core.train.report_training_metrics(
                steps_completed=step, metrics={"loss": 1.0 / step, "acc": 1.0 - 1.0 / step}
            )
            if float(hp["interval"]) > 0:
                time.sleep(float(hp["interval"]))
        core.train.report_validation_metrics(steps_completed=step, metrics={"loss": 1.0 / step})
        op.report_completed(1.0 / step)
"""


def _config(name: str, trials: int, steps: int, seconds: float, interval: float) -> dict[str, Any]:
    return {
        "name": name,
        "entrypoint": "python3 train.py",
        "hyperparameters": {
            "i": {"type": "categorical", "vals": list(range(trials))},
            "steps": steps,
            "seconds": seconds,
            "interval": interval,
        },
        "searcher": {
            "name": "grid",
            "metric": "loss",
            "max_length": {"batches": 10**9},
            "max_concurrent_trials": 0,
        },
        "max_restarts": 0,
    }


def _routes(exp_id: int, trial_id: int) -> list[tuple[str, str, dict[str, Any]]]:
    """(label, path, params) of the read routes a reader cycles through."""
    return [
        ("GET /experiments", "/api/v1/experiments", {"limit": 50}),
        ("GET /experiments/{id}/trials", f"/api/v1/experiments/{exp_id}/trials", {}),
        ("GET /trials/{id}", f"/api/v1/trials/{trial_id}", {}),
        (
            "GET /trials/metrics/trial_metrics",
            "/api/v1/trials/metrics/trial_metrics",
            {"trialIds": trial_id, "group": "training"},
        ),
    ]


def _reader_proc(
    url: str,
    token: str,
    routes: list[tuple[str, str, dict[str, Any]]],
    threads: int,
    seconds: float,
    think: float,
    jitter: float,
    seed: int,
    out: Any,
    ready: Any,
    go: Any,
    start: Any,
) -> None:
    """``threads`` reader threads for ``seconds``; puts {label: [latency_s, ...]} on ``out``.

    Each thread opens its session with one uncounted request; the process then says ``ready`` and
    waits for ``go``, so no reader measures while another process is still importing or connecting
    (on 2 cores the load generator's own start-up showed up as the master's p99)."""
    results: dict[str, list[float]] = {label: [] for label, _, _ in routes}
    errors: list[str] = []
    lock = threading.Lock()
    connected = threading.Barrier(threads + 1)
    begin = threading.Event()
    times: dict[str, float] = {}

    def run(offset: int) -> None:
        # Plain HTTP reading whole bodies, undecoded: the readers share the master's 2 cores, and
        # decoding a 2,000-row metric stream per request cost the load generator about as much
        # CPU as the master spent answering it (a latency of the client, measured as the master's).
        http = requests.Session()
        http.headers.update(Session(url, token).headers())
        http.get(f"{url}/api/v1/master", timeout=60).raise_for_status()
        connected.wait()
        begin.wait()
        start_at, stop_at = times["start"], times["stop"]
        mine: dict[str, list[float]] = {label: [] for label, _, _ in routes}
        rng = random.Random(seed * 1000 + offset)
        # Readers start spread over one think time, as independent clients would.
        first = start_at + (think * rng.random() if think > 0 else 0.0)
        while time.monotonic() < first:
            time.sleep(0.01)
        i = offset
        while time.monotonic() < stop_at:
            label, path, params = routes[i % len(routes)]
            i += 1
            began = time.perf_counter()
            try:
                response = http.get(f"{url}{path}", params=params, timeout=60)
                response.raise_for_status()
                if not response.content:
                    raise RuntimeError("empty response")
            except Exception as exc:  # counted, not fatal: a benchmark reports what it saw
                with lock:
                    errors.append(f"{label}: {exc}")
                continue
            mine[label].append(time.perf_counter() - began)
            if think > 0:
                time.sleep(think * rng.uniform(1 - jitter, 1 + jitter))
        with lock:
            for key, values in mine.items():
                results[key].extend(values)

    workers = [threading.Thread(target=run, args=(n,)) for n in range(threads)]
    for w in workers:
        w.start()
    connected.wait()
    ready.put(True)
    go.wait()
    times["start"] = start.value  # CLOCK_MONOTONIC: the same clock in every process
    times["stop"] = start.value + seconds
    begin.set()
    for w in workers:
        w.join()
    out.put((results, errors))


def read_phase(
    url: str, token: str, routes: list[tuple[str, str, dict[str, Any]]], args: argparse.Namespace
) -> tuple[dict[str, list[float]], list[str]]:
    """Run ``args.readers`` readers for ``args.seconds``; latencies per route and errors."""
    ctx = multiprocessing.get_context("spawn")
    out, ready, go, start = ctx.Queue(), ctx.Queue(), ctx.Event(), ctx.Value("d", 0.0)
    per_proc = [
        args.readers // args.procs + (1 if n < args.readers % args.procs else 0)
        for n in range(args.procs)
    ]
    procs = [
        ctx.Process(
            target=_reader_proc,
            args=(
                url,
                token,
                routes,
                n,
                args.seconds,
                args.think,
                args.jitter,
                i,
                out,
                ready,
                go,
                start,
            ),
        )
        for i, n in enumerate(per_proc)
        if n > 0
    ]
    for p in procs:
        p.start()
    for _ in procs:
        ready.get(timeout=300)
    start.value = time.monotonic() + 0.2
    go.set()
    merged: dict[str, list[float]] = {label: [] for label, _, _ in routes}
    errors: list[str] = []
    for _ in procs:
        results, errs = out.get(timeout=args.seconds + 300)
        for key, values in results.items():
            merged[key].extend(values)
        errors.extend(errs)
    for p in procs:
        p.join()
    return merged, errors


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--readers", type=int, default=50)
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--interval", type=float, default=0.05)
    parser.add_argument("--history-steps", type=int, default=2000)
    parser.add_argument("--procs", type=int, default=5)
    parser.add_argument("--think", type=float, default=1.0)
    parser.add_argument("--jitter", type=float, default=0.5)
    parser.add_argument("--db", default=None)
    args = parser.parse_args()

    flags = ["--slots", str(args.trials + 1)]
    if args.db:
        flags += ["--db", args.db]
    proc, session = start_master_process(*flags)
    try:
        context = pathlib.Path(tempfile.mkdtemp(prefix="det-bench-load-"))
        (context / "train.py").write_text(TRAIN)
        history = create_experiment(
            session, _config("history", 1, args.history_steps, 0, 0), context
        )
        wait_completed(session, history, timeout=300)
        trial_id = session.request("GET", f"/api/v1/experiments/{history}/trials")["trials"][0][
            "id"
        ]
        routes = _routes(history, trial_id)
        token = str(session.token)

        idle, idle_errors = read_phase(session.master_url, token, routes, args)

        load = create_experiment(
            session,
            _config("load", args.trials, 0, args.seconds * 4 + 120, args.interval),
            context,
        )

        def all_reporting() -> bool:
            trials = session.request("GET", f"/api/v1/experiments/{load}/trials")["trials"]
            return len(trials) == args.trials and all(
                int(t.get("totalBatchesProcessed") or 0) > 0 for t in trials
            )

        started = time.monotonic()
        wait_for(all_reporting, timeout=600, interval=0.5)
        ready_s = time.monotonic() - started
        loaded, loaded_errors = read_phase(session.master_url, token, routes, args)
        trials = session.request("GET", f"/api/v1/experiments/{load}/trials")["trials"]
        reported = sum(int(t.get("totalBatchesProcessed") or 0) for t in trials)
        session.request("POST", f"/api/v1/experiments/{load}/kill", body={})
    finally:
        proc.terminate()
        proc.wait(60)

    print(
        f"{args.readers} readers x {args.seconds:.0f} s, idle master vs {args.trials} trials"
        f" reporting every {args.interval} s (all reporting after {ready_s:.1f} s;"
        f" {reported} training reports by the end); think {args.think} s ± {args.jitter:.0%};"
        f" db: {args.db or 'sqlite'}"
    )
    header = (
        f"{'route':36} {'idle req/s':>10} {'idle p50':>9} {'idle p99':>9}"
        f" {'load req/s':>10} {'load p50':>9} {'load p99':>9} {'p99 ratio':>9}"
    )
    print(header)
    print("-" * len(header))
    worst = 0.0
    for label, _, _ in routes:
        a, b = idle[label], loaded[label]
        p99_idle, p99_load = _pct(a, 0.99), _pct(b, 0.99)
        worst = max(worst, p99_load)
        print(
            f"{label:36} {len(a) / args.seconds:10.1f} {_pct(a, 0.5):7.1f}ms {p99_idle:7.1f}ms"
            f" {len(b) / args.seconds:10.1f} {_pct(b, 0.5):7.1f}ms {p99_load:7.1f}ms"
            f" {p99_load / p99_idle:8.2f}x"
        )
    total_idle = sum(len(v) for v in idle.values()) / args.seconds
    total_load = sum(len(v) for v in loaded.values()) / args.seconds
    print(f"{'all reads':36} {total_idle:10.1f} {'':>9} {'':>9} {total_load:10.1f}")
    print(f"errors: idle {len(idle_errors)}, loaded {len(loaded_errors)}")
    for error in (idle_errors + loaded_errors)[:5]:
        print("  " + error)
    verdict = "met" if worst < TARGET_P99_MS else "NOT met"
    print(
        f"target p99 < {TARGET_P99_MS:.0f} ms for reads under load: {verdict} (worst {worst:.1f} ms)"
    )


if __name__ == "__main__":
    main()
