"""A chart-tile builder in its own process, for ``bench_metrics_ingest.py --tile-process`` (started
by the ``_tile_process`` prelude in the master's process): ``python _tile_builder.py DB_URL
MASTER_PID``. It follows the ``metrics`` table by id: every pass reads up to :data:`READ_ROWS`
unarchived rows after the last one it built and runs the real ``update_tiles`` on them in its own
transaction (rollbacks are not handled: the benchmark's load has none), then sleeps
``DET_BENCH_TILE_PAUSE`` seconds (default 0). After each pass it appends ``rows built, rows
behind`` to ``DET_BENCH_TILE_LOG``; it exits with the master."""

from __future__ import annotations

import collections
import os
import sys
import time
from typing import Any

READ_ROWS = 100_000
PAUSE_ENV = "DET_BENCH_TILE_PAUSE"
LOG_ENV = "DET_BENCH_TILE_LOG"


class _Run:
    """What ``update_tiles`` reads of a run."""

    __slots__ = ("id", "run_id")

    def __init__(self, trial_id: int, run_id: int) -> None:
        self.id, self.run_id = trial_id, run_id


def _build(url: str, master_pid: int) -> None:
    import orjson

    from determined.master._core import _metric_tiles
    from determined.master._core._metrics import MetricReport
    from determined.master.db import Database

    db = Database(url)
    mark = "?" if url.startswith("sqlite") else "%s"
    read = (
        "SELECT id, trial_id, trial_run_id, metric_group, total_batches, metrics FROM metrics "
        f"WHERE id > {mark} AND archived = {mark} ORDER BY id LIMIT {READ_ROWS}"
    )
    pause = float(os.environ.get(PAUSE_ENV) or 0)
    log_path = os.environ.get(LOG_ENV)
    cursor = built = 0
    while True:  # until the master has made and migrated its database
        try:
            with db.read() as session:
                session.connection().exec_driver_sql("SELECT id FROM metrics LIMIT 1").fetchall()
            break
        except Exception:
            time.sleep(0.2)
    while True:
        try:
            os.kill(master_pid, 0)
        except OSError:
            return
        with db.read() as session:
            connection = session.connection()
            rows = connection.exec_driver_sql(read, (cursor, False)).fetchall()
            top = connection.exec_driver_sql("SELECT max(id) FROM metrics").scalar() or 0
        if rows:
            by_trial: dict[int, list[Any]] = collections.defaultdict(list)
            runs: dict[int, int] = {}
            for _, trial, run_id, group, steps, stored in rows:
                metrics = orjson.loads(stored) if isinstance(stored, (str, bytes)) else stored
                avg = metrics.get("avg_metrics") or {}
                by_trial[trial].append(MetricReport(group, run_id, steps, avg, (), None))
                runs[trial] = max(runs.get(trial, 0), run_id)
            with db.write() as session:
                batch = [(_Run(t, runs[t]), reports) for t, reports in by_trial.items()]
                _metric_tiles.update_tiles(session, batch)  # type: ignore[arg-type]
            cursor = rows[-1][0]
            built += len(rows)
        if log_path:
            with open(log_path, "a") as log:
                log.write(f"{built} {max(0, top - cursor)}\n")
        time.sleep(pause if rows else 0.05)


if __name__ == "__main__":
    _build(sys.argv[1], int(sys.argv[2]))
