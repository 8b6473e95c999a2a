"""Where PostgreSQL's own CPU goes when the metrics writer stores reports: server CPU per metric row.

On PostgreSQL the master and the server share the machine's cores, so the server's CPU per row
bounds ingestion as much as the master's. This drives the real ``MetricsWriter`` (one lane, no
HTTP) with 100 trials writing batches of 500 training reports (3 metrics each, steps counting up
as in training, to ``--rounds`` x 500 steps per trial) on a fresh database of the local test server
(tests/postgres_db.py), and reads the CPU time of the database's backends from /proc (run it as a
user who may read the server's processes, e.g. root). Each variant gets its own fresh database;
the baselines in the same run switch off parts of the write path:

- whole path: what the master does;
- chart tiles off: ``start_tiles`` starts nothing (what the tiles cost).

The master's CPU counts its writer helper processes (``_writer_helpers``) with it.

A second table: ``COPY`` of the metric rows alone (2,000 per commit) with the foreign key to
``runs`` and without it (what the per-row foreign-key check costs the server).

    .venv/bin/python benchmarks/bench_pg_server_cost.py [--rounds 20] [--repeat 2]
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
from typing import Any

import sqlalchemy
from _proc import cpu_seconds, helpers_cpu, helpers_cpu_since
from _tiles_off import no_tiles

from determined.master._api._metric_reports import parse_reports
from determined.master._core import _metric_tiles
from determined.master._core._metrics_writer import MetricsWriter
from determined.master.db import Database
from determined.master.db._metric_inserts import MetricRow, insert_metric_rows

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests"))

TRIALS = 100
BATCH = 500


def _backends(db: Database, name: str) -> list[int]:
    with db.engine.connect() as connection:
        return [
            int(pid)
            for (pid,) in connection.execute(
                sqlalchemy.text("SELECT pid FROM pg_stat_activity WHERE datname = :n"), {"n": name}
            )
        ]


@contextlib.contextmanager
def _database() -> Iterator[tuple[Database, str, list[int]]]:
    """A fresh migrated database with one experiment of :data:`TRIALS` runs."""
    import postgres_db  # tests/postgres_db.py: starts the local server when it is not running
    from db_rows import experiment_with_runs

    url = postgres_db.postgres_url()
    db = Database(url)
    try:
        db.migrate()
        _, ids = experiment_with_runs(db, TRIALS, username="bench")
        yield db, url.rsplit("/", 1)[1], ids
    finally:
        db.close()
        postgres_db.drop_database(url)


def _reports(trial: int, start: int, count: int = BATCH) -> list[Any]:
    return parse_reports(
        [
            (
                "training",
                {
                    "trialId": trial,
                    "trialRunId": 1,
                    "stepsCompleted": s,
                    "metrics": {"avgMetrics": {"loss": 1.0 / s, "acc": 0.5, "lr": 0.01}},
                },
            )
            for s in range(start, start + count)
        ]
    )


@contextlib.contextmanager
def _patched(name: str, replacement: Callable[..., Any] | None) -> Iterator[None]:
    if replacement is None:
        yield
        return
    saved = getattr(_metric_tiles, name)
    setattr(_metric_tiles, name, replacement)
    try:
        yield
    finally:
        setattr(_metric_tiles, name, saved)


def writer_path(rounds: int, patch: tuple[str, Callable[..., Any]] | None) -> dict[str, float]:
    """Server and master CPU µs per row of the writer storing ``rounds`` batches per trial."""
    with _database() as (db, name, ids), _patched(*(patch or ("", None))):
        writer = MetricsWriter(db.write, lambda *args: None)
        try:
            bodies = [[_reports(t, 1 + BATCH * k) for t in ids] for k in range(rounds)]
            writer.write(ids[0], _reports(ids[0], 10**9, 1))  # the lane's connection is open
            pids = _backends(db, name)
            server0, master0 = sum(map(cpu_seconds, pids)), time.process_time()
            helpers0 = helpers_cpu()
            for k in range(rounds):
                threads = [
                    threading.Thread(target=writer.write, args=(t, bodies[k][i]))
                    for i, t in enumerate(ids)
                ]
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join()
            alive = set(_backends(db, name))
            server = sum(cpu_seconds(p) for p in pids if p in alive) - server0
            master = time.process_time() - master0 + helpers_cpu_since(helpers0)
        finally:
            writer.close()
    rows = rounds * TRIALS * BATCH
    return {"server": 1e6 * server / rows, "master": 1e6 * master / rows}


def copy_alone(with_fk: bool, commits: int = 30) -> float:
    """Server CPU µs per row of ``COPY`` into ``metrics``, 2,000 rows per commit."""
    now = datetime.datetime.now(datetime.timezone.utc)
    values: dict[str, Any] = {
        "avg_metrics": {"loss": 0.5, "acc": 0.9, "lr": 0.01},
        "batch_metrics": [],
    }
    with _database() as (db, _, ids), db.engine.connect() as connection:
        fk = connection.execute(
            sqlalchemy.text(
                "SELECT conname FROM pg_constraint "
                "WHERE conrelid = 'metrics'::regclass AND contype = 'f'"
            )
        ).scalar()
        # Since migration 0015 the schema has none; older trees have ``metrics_trial_id_fkey``.
        if fk and not with_fk:
            connection.execute(sqlalchemy.text(f"ALTER TABLE metrics DROP CONSTRAINT {fk}"))
        elif not fk and with_fk:
            connection.execute(
                sqlalchemy.text(
                    "ALTER TABLE metrics ADD FOREIGN KEY (trial_id) REFERENCES runs (id) "
                    "ON DELETE CASCADE"
                )
            )
        pid = int(connection.execute(sqlalchemy.text("SELECT pg_backend_pid()")).scalar_one())
        connection.commit()
        start = cpu_seconds(pid)
        for k in range(commits):
            rows: list[MetricRow] = [
                (ids[i % TRIALS], 1, "training", k * 2000 + i, now, values, False)
                for i in range(2000)
            ]
            insert_metric_rows(connection, rows)
            connection.commit()
        return 1e6 * (cpu_seconds(pid) - start) / (commits * 2000)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=20, help="batches of 500 per trial")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    variants: list[tuple[str, tuple[str, Callable[..., Any]] | None]] = [
        ("whole path", None),
        ("chart tiles off", ("start_tiles", no_tiles)),
    ]
    print(f"{TRIALS} trials x {args.rounds} batches of {BATCH} reports, one writer lane")
    print("| variant | run | server CPU µs/row | master CPU µs/row (writer only, no HTTP) |")
    print("|---|---|---|---|")
    for run in range(1, args.repeat + 1):
        for label, patch in variants:
            cost = writer_path(args.rounds, patch)
            print(f"| {label} | {run} | {cost['server']:.1f} | {cost['master']:.1f} |", flush=True)
    print()
    print("| COPY of metric rows alone | run | server CPU µs/row |")
    print("|---|---|---|")
    for run in range(1, args.repeat + 1):
        for label, with_fk in (("with the foreign key", True), ("without it", False)):
            print(f"| {label} | {run} | {copy_alone(with_fk):.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
