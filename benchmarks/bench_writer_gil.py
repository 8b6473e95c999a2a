"""The metrics writer beside a busy HTTP thread: what the GIL costs it, on SQLite.

In a det master the HTTP thread (the event loop: decoding and parsing request bodies) and the
metrics writer thread share one GIL; during ``bench_metrics_ingest.py`` the first takes about a
third of a core and the writer two thirds (per-thread CPU from /proc, benchmarks/RESULTS.md).
Python's sqlite3 releases the GIL around every ``sqlite3_step`` and must win it back afterwards:
while another thread runs Python code that takes up to the switch interval (5 ms), so a statement
that steps once per row (``executemany``) can wait once per row. Two measurements:

1. **One statement vs executemany.** 2,000 metric rows of one trial (the shape of four 500-report
   requests) inserted into the real schema by ``executemany`` of one INSERT (baseline: the writer's
   path before) and by the writer's ``insert_metric_rows`` (one ``INSERT ... SELECT`` over
   ``json_each`` per request), each alone and beside a thread spinning in Python; wall time per
   row.
2. **The writer beside a duty-cycled thread.** The real ``MetricsWriter`` storing 100 trials x
   ``--rounds`` batches of 500 reports (steps counting up as in training), alone and beside a
   thread that runs Python 35 % of every 10 ms (about the HTTP thread's share); rows/s and the
   ratio. Alone is the baseline (what the writer would do with a core of its own).

    .venv/bin/python benchmarks/bench_writer_gil.py [--rounds 10] [--duty 0.35]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import pathlib
import sys
import threading
import time
from collections.abc import Callable, Iterator

import orjson
from sqlalchemy import Connection

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests"))

from bench_pg_server_cost import BATCH, TRIALS, _reports
from bench_tile_writes import _database, _post_all

from determined.master._core._metrics_writer import MetricsWriter
from determined.master.db._metric_inserts import COLUMNS, MetricRow, insert_metric_rows


@contextlib.contextmanager
def _busy(duty: float) -> Iterator[None]:
    """A thread running Python ``duty`` of every 10 ms (1.0: all the time) while the block runs."""
    stop = threading.Event()

    def run() -> None:
        busy, idle = 0.010 * duty, 0.010 * (1 - duty)
        while not stop.is_set():
            until = time.perf_counter() + busy
            while time.perf_counter() < until:
                pass
            if idle:
                time.sleep(idle)

    thread = threading.Thread(target=run, daemon=True)
    if duty > 0:
        thread.start()
    try:
        yield
    finally:
        stop.set()
        if duty > 0:
            thread.join()


def _executemany(connection: Connection, rows: list[MetricRow]) -> None:
    """The writer's SQLite insert before: one prepared INSERT stepped once per row."""
    cursor = connection.connection.driver_connection.cursor()  # type: ignore[union-attr]
    cursor.executemany(
        f"INSERT INTO metrics ({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
        [
            (
                t,
                r,
                g,
                s,
                e.replace(tzinfo=None).isoformat(" ", "microseconds"),
                orjson.dumps(m).decode(),
                int(a),
            )
            for t, r, g, s, e, m, a in rows
        ],
    )
    cursor.close()


def insert_per_row(insert: Callable[[Connection, list[MetricRow]], None], duty: float) -> float:
    """Wall µs per row of ``insert`` storing 2,000-row transactions, beside a busy thread."""
    with _database(postgres=False) as (db, ids):
        now = datetime.datetime.now(datetime.timezone.utc)
        rows_done = 0
        transactions = 1 if duty else 20  # beside a spinner the old path takes ms per row
        with _busy(duty):
            start = time.perf_counter()
            for k in range(transactions):
                rows: list[MetricRow] = []
                for request in range(4):
                    step = 1 + BATCH * (4 * k + request)
                    rows += [
                        (
                            ids[0],
                            1,
                            "training",
                            s,
                            now,
                            {"avg_metrics": {"loss": 1.0 / s}, "batch_metrics": []},
                            False,
                        )
                        for s in range(step, step + BATCH)
                    ]
                with db.write() as session:
                    insert(session.connection(), rows)
                rows_done += len(rows)
            wall = time.perf_counter() - start
    return 1e6 * wall / rows_done


def writer_rows_per_s(rounds: int, duty: float) -> float:
    """Rows/s of the real writer storing ``rounds`` batches per trial, beside a busy thread."""
    with _database(postgres=False) as (db, ids):
        writer = MetricsWriter(db.write, lambda *args: None)
        try:
            bodies = [[_reports(t, 1 + BATCH * k) for t in ids] for k in range(rounds)]
            writer.write(ids[0], _reports(ids[0], 10**9, 1))  # the lane's connection is open
            with _busy(duty):
                start = time.perf_counter()
                for k in range(rounds):
                    _post_all(writer, list(zip(ids, bodies[k], strict=True)))
                wall = time.perf_counter() - start
        finally:
            writer.close()
    return float(rounds * TRIALS * BATCH / wall)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10, help="batches of 500 per trial")
    parser.add_argument("--duty", type=float, default=0.35, help="the busy thread's share")
    args = parser.parse_args()

    print("| 2,000 metric rows per transaction, wall per row | alone | beside a spinning thread |")
    print("|---|---|---|")
    for name, insert in (
        ("executemany (before)", _executemany),
        ("insert_metric_rows", insert_metric_rows),
    ):
        alone = insert_per_row(insert, 0.0)
        beside = insert_per_row(insert, 1.0)
        print(f"| {name} | {alone:.2f} µs | {beside:,.2f} µs |")

    alone = writer_rows_per_s(args.rounds, 0.0)
    beside = writer_rows_per_s(args.rounds, args.duty)
    print()
    print(f"| MetricsWriter, {TRIALS} trials x {args.rounds} batches of {BATCH} | rows/s |")
    print("|---|---|")
    print(f"| alone (baseline) | {alone:,.0f} |")
    print(
        f"| beside a thread busy {args.duty:.0%} of the time | {beside:,.0f} ({beside / alone:.2f}x) |"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
