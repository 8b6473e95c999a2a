"""What the chart tiles cost the metrics writer, per metric row, beside the same writer without them.

Drives the real ``MetricsWriter`` (no HTTP) on a fresh SQLite database (or ``--postgres``: a fresh
database on the local test server, tests/postgres_db.py) with 100 trials reporting 3 metrics, steps
counting up as in training, in two ways:

- batches: every trial posts batches of 500 reports, all trials at once (the metrics shipper of a
  trial reporting often), ``--rounds`` rounds;
- single reports: after 3,000 steps each, trials post one report per request, one request at a
  time (upstream's client; a trial reporting now and then), 40 rounds.

For each, the CPU per row of the writer's threads and of the writer helper processes
(``_writer_helpers``, which build a large batch's tiles), with the tiles (``whole``) and with
``start_tiles`` starting nothing (``tiles off``, the baseline in the same run); their difference
is what the tiles cost.

    .venv/bin/python benchmarks/bench_tile_writes.py [--rounds 10] [--postgres]
"""

from __future__ import annotations

import argparse
import contextlib
import pathlib
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from typing import Any

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests"))

from _proc import helpers_cpu, helpers_cpu_since, thread_cpu
from bench_pg_server_cost import BATCH, TRIALS, _no_tiles, _reports
from db_rows import experiment_with_runs

from determined.master._core import _metric_tiles
from determined.master._core._metrics_writer import MetricsWriter
from determined.master.db import Database

SINGLE_START = 3000
SINGLE_ROUNDS = 40


@contextlib.contextmanager
def _database(postgres: bool) -> Iterator[tuple[Database, list[int]]]:
    drop: Callable[[], None] | None = None
    if postgres:
        import postgres_db

        url = postgres_db.postgres_url()
        drop = lambda: postgres_db.drop_database(url)  # noqa: E731
    else:
        url = f"sqlite:///{tempfile.mkdtemp()}/bench.db"
    db = Database(url)
    try:
        db.migrate()
        _, ids = experiment_with_runs(db, TRIALS, username="bench")
        yield db, ids
    finally:
        db.close()
        if drop is not None:
            drop()


def _post_all(writer: MetricsWriter, bodies: list[tuple[int, list[Any]]]) -> None:
    threads = [threading.Thread(target=writer.write, args=body) for body in bodies]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def run(mode: str, tiles: bool, rounds: int, postgres: bool) -> tuple[float, float]:
    """CPU µs per metric row of the writer's threads and of the tile helpers."""
    saved = _metric_tiles.start_tiles
    if not tiles:
        _metric_tiles.start_tiles = _no_tiles
    try:
        with _database(postgres) as (db, ids):
            writer = MetricsWriter(db.write, lambda *args: None)
            try:
                if mode == "batches":
                    work = [[(t, _reports(t, 1 + BATCH * k)) for t in ids] for k in range(rounds)]
                else:
                    for start in range(1, SINGLE_START, BATCH):
                        count = min(BATCH, SINGLE_START - start)
                        _post_all(writer, [(t, _reports(t, start, count)) for t in ids])
                    work = [
                        [(t, _reports(t, SINGLE_START + k, 1))]
                        for k in range(SINGLE_ROUNDS)
                        for t in ids
                    ]
                writer.write(ids[0], _reports(ids[0], 10**9, 1))  # the lane is started
                main = str(threading.get_native_id())
                before, helpers = thread_cpu(), helpers_cpu()
                for bodies in work:
                    _post_all(writer, bodies)
                after, helper_cpu = thread_cpu(), helpers_cpu_since(helpers)
            finally:
                writer.close()
    finally:
        _metric_tiles.start_tiles = saved
    # The writer's lane threads: those that existed before the load, other than this one.
    cpu = sum(after.get(tid, t0) - t0 for tid, t0 in before.items() if tid != main)
    rows = sum(len(reports) for bodies in work for _, reports in bodies)
    return 1e6 * cpu / rows, 1e6 * helper_cpu / rows


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=10, help="batches of 500 per trial")
    parser.add_argument("--postgres", action="store_true")
    args = parser.parse_args()
    db = "PostgreSQL" if args.postgres else "SQLite"
    print(f"{db}, {TRIALS} trials, 3 metrics; CPU µs per metric row")
    print(
        "| mode | whole: writer + tile helpers | tiles off (baseline) | tiles' share "
        "| ratio whole / baseline |"
    )
    print("|---|---|---|---|---|")
    for mode in ("batches", "single reports"):
        writer, helpers = run(mode, True, args.rounds, args.postgres)
        off = sum(run(mode, False, args.rounds, args.postgres))
        whole = writer + helpers
        print(
            f"| {mode} | {writer:.1f} + {helpers:.1f} | {off:.1f} | {whole - off:.1f} "
            f"| {whole / max(off, 1e-9):.2f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
