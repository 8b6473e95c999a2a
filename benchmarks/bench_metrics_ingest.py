"""Metric rows ingested per second by a det master with 100 concurrently reporting trials, on SQLite
and on PostgreSQL, and how long a single report waits for its acknowledgement meanwhile.

The master runs as its own process (`det-master up`, `--db` naming a real PostgreSQL database for
``postgres``: the local server the tests start, see tests/postgres_db.py). An experiment of 101
zero-slot trials whose processes just wait; 100 reporter threads play the metrics shippers of 100
trials: each sends batches of reports to its own trial, as ``core_context.train.report_training_metrics``
does from its background thread. Meanwhile the 101st trial is the probe: it posts one report per
request (a trial reporting now and then), one after the other, and its acknowledgement latency is the
"single report ack" figure. The baseline in the same run: the same 100 trials posting one report per
request (what upstream's client does). Each reporter uses its trial's own allocation token (the trial
hands it over through a file), steps count up across requests as in training, and a request body is
encoded (orjson) before its request is timed. Besides rows/s the table gives the master's CPU time
per 1,000 rows in the batched phase (its process and its writer helper processes together): a
figure a loaded machine distorts less than rows/s; and the CPU of the master's two busiest threads,
of all its threads and of its writer helpers in that phase, in cores (the metrics writer and the HTTP
thread share one interpreter lock: a threads' total near 1.0 says the master is bound by it).

With ``--http-only`` the master acknowledges batches without storing them (``_http_only.py``; the
probe's single reports are still stored): what the HTTP side (receiving, decoding, parsing) costs
alone, to set beside a normal run. Two more variants for what the chart tiles cost: ``--no-tiles``,
the writer stores none (``_no_tiles.py``), and ``--tile-process``, a second process builds them
from the stored rows instead (``_tile_process.py``; ``--tile-pause S`` between its reads); it prints
how far behind the builder was at the end of the batched phase.

    .venv/bin/python benchmarks/bench_metrics_ingest.py [--db sqlite|postgres|both] [--trials 100]
        [--seconds 10] [--batch 500] [--postgres-url postgresql+psycopg://USER:PW@HOST/EMPTY_DB]
        [--http-only | --no-tiles | --tile-process [--tile-pause S]]
"""

from __future__ import annotations

import argparse
import http.client
import os
import pathlib
import sys
import tempfile
import threading
import time
from typing import Any

import _tile_builder
import orjson
from _master import create_experiment, start_master_process, wait_for
from _proc import cpu_seconds, helpers_cpu, helpers_cpu_since, thread_cpu

from determined.client import metrics_body

WAIT_SCRIPT = """
import json, os, pathlib, time
info = json.load(open(os.environ["DET_CLUSTER_INFO"]))
trial = info["trial_info"]
tokens = pathlib.Path(trial["hparams"]["tokens_dir"])
(tokens / f"{trial['trial_id']}.tmp").write_text(info["session_token"])
(tokens / f"{trial['trial_id']}.tmp").rename(tokens / f"{trial['trial_id']}.token")
time.sleep(3600)
"""
"""A trial that hands its allocation token to the benchmark (which plays its metrics shipper)."""

_PRELUDES = {"http-only": "_http_only", "no-tiles": "_no_tiles", "tile-process": "_tile_process"}
_VARIANTS = {
    "http-only": "batches acknowledged without being stored (benchmarks/_http_only.py)",
    "no-tiles": "no chart tiles stored (benchmarks/_no_tiles.py)",
    "tile-process": "chart tiles built by a second process (benchmarks/_tile_process.py)",
}
"""Not det as it ships: the targets are not judged for these."""

TARGET_ROWS_PER_S = 100_000
TARGET_ACK_P99_MS = 100.0


class _Reports:
    """One trial's reports, steps counting up across requests as in training (so the master's
    per-trial chart tiles see a growing x range, not the same steps again)."""

    def __init__(self, trial_id: int, run_id: int, batch: int) -> None:
        self.trial_id = trial_id
        self.run_id = run_id
        self.batch = batch
        self.step = 0

    def body(self) -> bytes:
        """The next request body: ``batch`` reports (batched route) or one report."""
        reports = []
        for _ in range(self.batch):
            self.step += 1
            s = self.step
            reports.append(
                metrics_body(
                    self.trial_id,
                    self.run_id,
                    "training",
                    {"loss": 1.0 / (s + 1), "lr": 0.1, "acc": 0.5},
                    s,
                )
            )
        return orjson.dumps({"reports": reports} if self.batch > 1 else reports[0])


class _Poster:
    """One keep-alive connection posting to one trial's metrics route with the trial's own
    allocation token (what a trial's session sends)."""

    def __init__(self, url: str, token: str, trial_id: int, batched: bool) -> None:
        host, port = url.removeprefix("http://").split(":")
        self.connection = http.client.HTTPConnection(host, int(port), timeout=120)
        self.headers = {
            "Grpc-Metadata-x-allocation-token": f"Bearer {token}",
            "Content-Type": "application/json",
        }
        self.path = f"/api/v1/trials/{trial_id}/metrics" + ("/batch" if batched else "")

    def post(self, body: bytes) -> float:
        start = time.perf_counter()
        self.connection.request("POST", self.path, body=body, headers=self.headers)
        response = self.connection.getresponse()
        response.read()
        if response.status != 200:
            raise RuntimeError(f"{self.path}: {response.status}")
        return time.perf_counter() - start


def run_load(
    url: str,
    tokens: dict[int, str],
    sources: dict[int, _Reports],
    seconds: float,
    batch: int,
    probe: tuple[int, int] | None = None,
) -> tuple[int, list[float], list[float]]:
    """Each trial's thread posts its bodies over one keep-alive connection for ``seconds``;
    the ``probe`` trial meanwhile posts single reports one after the other (10 ms apart).

    Returns rows/s of the trials, their request latencies and the probe's acknowledgement latencies.
    """
    rows = [0] * len(sources)
    latencies: list[list[float]] = [[] for _ in sources]
    probe_latencies: list[float] = []
    stop = time.monotonic() + seconds
    errors: list[BaseException] = []

    def reporter(index: int, trial_id: int) -> None:
        poster = _Poster(url, tokens[trial_id], trial_id, batch > 1)
        reports = sources[trial_id]
        reports.batch = batch
        try:
            body = reports.body()
            while time.monotonic() < stop:
                latencies[index].append(poster.post(body))
                rows[index] += batch
                body = reports.body()  # encoded while nothing is timed
        except BaseException as exc:  # reported after the run
            errors.append(exc)
        finally:
            poster.connection.close()

    def prober(trial_id: int, run_id: int) -> None:
        poster = _Poster(url, tokens[trial_id], trial_id, False)
        reports = _Reports(trial_id, run_id, 1)
        try:
            time.sleep(min(1.0, seconds / 10))  # the load is up
            while time.monotonic() < stop:
                probe_latencies.append(poster.post(reports.body()))
                time.sleep(0.01)
        except BaseException as exc:
            errors.append(exc)
        finally:
            poster.connection.close()

    threads = [threading.Thread(target=reporter, args=(i, t)) for i, t in enumerate(sources)]
    if probe is not None:
        threads.append(threading.Thread(target=prober, args=probe))
    began = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - began
    if errors:
        raise errors[0]
    return int(sum(rows) / elapsed), [x for per in latencies for x in per], probe_latencies


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time so far of process ``pid`` and its writer helpers (0 where /proc
    cannot tell)."""
    try:
        return cpu_seconds(pid) + sum(helpers_cpu(pid).values())
    except OSError:
        return 0.0


def _thread_shares(before: dict[str, float], after: dict[str, float], wall: float) -> str:
    """The master's busiest threads over a phase, in cores: ``0.64 + 0.33 of 0.98`` says one
    interpreter lock's worth of work split between the metrics writer and the HTTP thread."""
    used = sorted((after[t] - before.get(t, 0.0) for t in after), reverse=True)
    if not used or wall <= 0:
        return "n/a"
    top = " + ".join(f"{u / wall:.2f}" for u in used[:2])
    return f"{top} of {sum(used) / wall:.2f}"


def _pct(values: list[float], q: float) -> float:
    return sorted(values)[int(q * (len(values) - 1))] * 1000 if values else float("nan")


def bench(db: str, args: argparse.Namespace) -> dict[str, Any]:
    """One master on ``db``: batched load with the probe, then the one-report-per-request baseline."""
    flags = ["--slots", "1"]
    pg_url = None
    if db == "postgres" and args.postgres_url:
        flags += ["--db", args.postgres_url]  # the user's own (empty) database, kept afterwards
    elif db == "postgres":
        sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests"))
        import postgres_db

        pg_url = postgres_db.postgres_url()
        flags += ["--db", pg_url]
    tile_log = pathlib.Path(tempfile.mkdtemp()) / "tile_builder.log"
    if args.variant == "tile-process":  # read by the builder the master's prelude starts
        os.environ[_tile_builder.LOG_ENV] = str(tile_log)
        os.environ[_tile_builder.PAUSE_ENV] = str(args.tile_pause)
    master, session = start_master_process(*flags, prelude=_PRELUDES.get(args.variant))
    try:
        context = pathlib.Path(tempfile.mkdtemp())
        tokens_dir = pathlib.Path(tempfile.mkdtemp())
        (context / "wait.py").write_text(WAIT_SCRIPT)
        count = args.trials + 1
        config = {
            "name": "ingest-bench",
            "entrypoint": "python3 wait.py",
            "searcher": {
                "name": "random",
                "metric": "loss",
                "max_trials": count,
                "max_concurrent_trials": count,
            },
            "hyperparameters": {"tokens_dir": str(tokens_dir)},
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
            if len(ready) < count or len(list(tokens_dir.glob("*.token"))) < count:
                return None
            return sorted(ready)

        ready = wait_for(running, timeout=300, interval=0.2)
        trials, probe = ready[:-1], ready[-1]
        tokens = {t: (tokens_dir / f"{t}.token").read_text() for t, _ in ready}
        url = session.master_url
        print(f"{db}: load starts", flush=True)
        sources = {t: _Reports(t, r, args.batch) for t, r in trials}
        cpu, threads, started = _cpu_seconds(master.pid), thread_cpu(master.pid), time.time()
        helpers = helpers_cpu(master.pid)
        batched, batch_lat, probe_lat = run_load(
            url, tokens, sources, args.seconds, args.batch, probe
        )
        batched_cpu = _cpu_seconds(master.pid) - cpu
        if args.variant == "tile-process":
            built, behind = tile_log.read_text().split("\n")[-2].split()
            print(
                f"{db}: tile builder: {int(built):,} rows built, {int(behind):,} behind", flush=True
            )
        wall = time.time() - started
        shares = _thread_shares(threads, thread_cpu(master.pid), wall)
        shares += f"; writer helpers {helpers_cpu_since(helpers, master.pid) / wall:.2f}"
        # The baseline: the same trials go on, one report per request, from where they were.
        single, single_lat, _ = run_load(url, tokens, sources, args.seconds, 1)
        session.request("POST", f"/api/v1/experiments/{exp}/kill")
    finally:
        master.terminate()
        master.wait(timeout=60)
        if pg_url is not None:
            postgres_db.drop_database(pg_url)
    return {
        "db": db,
        "batched": batched,
        # master CPU per 1000 rows: a figure a loaded machine distorts less than rows/s
        "cpu_ms_per_1k": 1000 * batched_cpu / max(batched * args.seconds / 1000, 1e-9),
        "threads": shares,
        "batch_p50": _pct(batch_lat, 0.5),
        "batch_p99": _pct(batch_lat, 0.99),
        "probe_p50": _pct(probe_lat, 0.5),
        "probe_p99": _pct(probe_lat, 0.99),
        "probe_n": len(probe_lat),
        "single": single,
        "single_p50": _pct(single_lat, 0.5),
        "single_p99": _pct(single_lat, 0.99),
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument(
        "--postgres-url",
        help="an empty database on your own PostgreSQL server (default: a fresh database on the "
        "local server the tests use, dropped afterwards)",
    )
    variant = parser.add_mutually_exclusive_group()
    variant.add_argument(
        "--http-only",
        dest="variant",
        action="store_const",
        const="http-only",
        help="the master acknowledges batches without storing them (benchmarks/_http_only.py): "
        "what the HTTP side costs alone",
    )
    variant.add_argument(
        "--no-tiles",
        dest="variant",
        action="store_const",
        const="no-tiles",
        help="the metrics writer stores no chart tiles (benchmarks/_no_tiles.py)",
    )
    variant.add_argument(
        "--tile-process",
        dest="variant",
        action="store_const",
        const="tile-process",
        help="a second process builds the chart tiles (benchmarks/_tile_process.py)",
    )
    parser.add_argument(
        "--tile-pause",
        type=float,
        default=0.0,
        help="seconds the tile builder sleeps between reads",
    )
    args = parser.parse_args()
    dbs = ["sqlite", "postgres"] if args.db == "both" else [args.db]
    results = [bench(db, args) for db in dbs]

    print(f"{args.trials} reporting trials, {args.seconds:g} s each mode, batches of {args.batch}")
    if args.variant is not None:
        print(f"VARIANT {args.variant}: {_VARIANTS[args.variant]}")
    print(
        "| db | det batches rows/s | master CPU ms per 1k rows | master's busiest threads, cores "
        "| batch request p50 / p99 ms | single report ack p50 / p99 ms"
        " (probe trial, under the batched load) | baseline one report per request rows/s | "
        "its p50 / p99 ms | ratio |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        print(
            f"| {r['db']} | {r['batched']:,} | {r['cpu_ms_per_1k']:.1f} | {r['threads']} | "
            f"{r['batch_p50']:.0f} / {r['batch_p99']:.0f} | "
            f"{r['probe_p50']:.1f} / {r['probe_p99']:.1f} (n={r['probe_n']}) | {r['single']:,} | "
            f"{r['single_p50']:.0f} / {r['single_p99']:.0f} | "
            f"{r['batched'] / max(r['single'], 1):.0f}x |"
        )
    for r in [] if args.variant is not None else results:
        rows_ok = r["batched"] >= TARGET_ROWS_PER_S
        ack_ok = r["probe_p99"] <= TARGET_ACK_P99_MS
        print(
            f"{r['db']}: >= {TARGET_ROWS_PER_S:,} rows/s {'met' if rows_ok else 'MISSED'}; "
            f"single report ack p99 <= {TARGET_ACK_P99_MS:.0f} ms {'met' if ack_ok else 'MISSED'}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
