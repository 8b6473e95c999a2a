"""Databases upgrade in place to the metric tiles, on SQLite and on PostgreSQL: one made at
migration 0006 gets its tiles built from the existing unarchived metric rows (archived reports of
rolled-back runs left out) and a master started on it draws the curves from them; one made at 0015
gets its stored tiles converted into chunks as they are (0016)."""

from __future__ import annotations

import math
from typing import Any

import requests
import sqlalchemy as sa
from master.test_metric_tiles import tile_mismatches
from old_schema import EXPERIMENTS, METRICS, NOW, RUNS, USERS, upgrade_to

from determined.master._core import _metric_tiles, _tile_reads
from determined.master._core._metric_tiles import level_min
from determined.master._core._tile_columns import series_of
from determined.master.db import Database


def _metric(trial: int, run: int, group: str, step: int, values: dict[str, Any], archived: bool):
    key = "validation_metrics" if group == "validation" else "batch_metrics"
    return {"trial_id": trial, "trial_run_id": run, "metric_group": group, "total_batches": step,
            "end_time": NOW, "archived": archived,
            "metrics": {"avg_metrics": values, key: {} if group == "validation" else []}}  # fmt: skip


def _fill_0006(db: Database) -> None:
    """Two trials as a 0006 master left them: trial 1 with 5,000 training reports (a rollback
    at step 3,000 archived run 1's later ones) and validations, trial 2 with a few reports."""
    metrics = []
    for step in range(1, 5001):
        metrics.append(
            _metric(1, 1, "training", step, {"loss": 1 / step, "lr": "warmup"}, step >= 3000)
        )
    for step in range(3000, 4200, 3):
        metrics.append(_metric(1, 2, "training", step, {"loss": math.sin(step)}, False))
    for step in (1000, 2000, 4000):
        metrics.append(_metric(1, 1, "validation", step, {"loss": step / 1e4}, step >= 3000))
    metrics.append(_metric(1, 2, "validation", 4100, {"loss": 0.1, "acc": "NaN"}, False))
    for step in (5, 10, 15):
        metrics.append(_metric(2, 1, "training", step, {"loss": float(step)}, False))
    with db.engine.begin() as conn:
        conn.execute(
            USERS.insert(),
            [{"id": 1, "username": "admin", "admin": True, "password_hash": "", "active": True,
              "remote": False, "modified_at": NOW}],
        )  # fmt: skip
        conn.execute(
            EXPERIMENTS.insert(),
            [{"id": 1, "state": "COMPLETED", "original_config": "", "start_time": NOW,
              "end_time": NOW, "archived": False, "owner_id": 1, "project_id": 1,
              "job_id": "exp-1", "notes": "", "labels": [], "priority": 42, "weight": 1.0,
              "unmanaged": False,
              "config": {"name": "old", "searcher": {"name": "single", "metric": "loss"}}}],
        )  # fmt: skip
        conn.execute(
            RUNS.insert(),
            [{"id": t, "experiment_id": 1, "request_id": f"r{t}", "task_id": f"1.r{t}",
              "state": "COMPLETED", "start_time": NOW, "end_time": NOW, "hparams": {}, "seed": 1,
              "run_id": 2 if t == 1 else 1, "restarts": 0, "total_batches": 5000,
              "summary_metrics": {"training": {"loss": {"type": "number", "count": 1}}},
              "runner_state": "", "metadata": {}, "early_stopped_by_searcher": False,
              "archived": False} for t in (1, 2)],
        )  # fmt: skip
        conn.execute(METRICS.insert(), metrics)
        if db.engine.dialect.name == "postgresql":
            for table in ("users", "experiments", "runs"):
                conn.exec_driver_sql(
                    f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                    f"(SELECT MAX(id) FROM {table}))"
                )


def test_a_0006_database_gets_its_tiles_backfilled(db_url: str, make_master: Any) -> None:
    db = Database(db_url)
    upgrade_to(db, "0006")
    _fill_0006(db)
    db.migrate()
    with db.engine.connect() as conn:
        series = conn.exec_driver_sql(
            "SELECT trial_id, metric_group, run_id, x_min, x_max, level_min "
            "FROM metric_tile_series ORDER BY trial_id, metric_group"
        ).all()
    assert [tuple(r) for r in series] == [
        (1, "training", 2, 1, 4197, level_min(4197)),
        (1, "validation", 2, 1000, 4100, level_min(4100)),
        (2, "training", 1, 5, 15, level_min(15)),
    ]
    assert tile_mismatches(db, 1) == [] and tile_mismatches(db, 2) == []
    db.close()

    master = make_master(db_url)
    token = master.session("admin").request(
        "POST", "/api/v1/auth/login", body={"username": "admin", "password": ""}
    )["token"]
    curves = requests.get(
        f"{master.url}/ui/api/experiments/1/curves?group=training&metric=loss&width=400",
        cookies={"auth": token},
        timeout=30,
    ).json()
    assert [t["points"] for t in curves["trials"]] == [2999 + 400, 3]
    assert curves["trials"][0]["x"][-1] == 4197


_OLD_TILE = ("bucket", "n", "first_x", "first_y", "last_x", "last_y", "min_x", "min_y", "max_x",
             "max_y")  # fmt: skip


def _old_layout_tiles(db: Database, trial_id: int, group: str, run_id: int) -> list[Any]:
    """The tiles of a trial group in 0015's layout (a row per bucket), as 0015's master kept them:
    built from the raw rows, then stored row by row with their series state. Returns the rows."""
    with db.engine.begin() as conn:
        points = _metric_tiles._raw_points(conn, trial_id, group, -(2**62))
        low = level_min(max(x for x, _ in points))
        chunks = _metric_tiles.series_chunks(trial_id, group, series_of(points), low)
        rows = [
            {"trial_id": trial_id, "metric_group": group, "metric": metric, "level": level,
             **dict(zip(_OLD_TILE, tile, strict=True))}
            for (_, _, metric, level, _), columns in sorted(chunks.items())
            for tile in zip(*columns, strict=True)
        ]  # fmt: skip
        table = sa.table("metric_tiles", *(sa.column(c) for c in rows[0]))
        conn.execute(table.insert(), rows)
        xs = [x for x, _ in points]
        conn.execute(
            sa.table(
                "metric_tile_series",
                *(sa.column(c) for c in ("trial_id", "metric_group", "run_id", "x_min", "x_max",
                                         "level_min")),
            ).insert(),
            [{"trial_id": trial_id, "metric_group": group, "run_id": run_id, "x_min": min(xs),
              "x_max": max(xs), "level_min": low}],
        )  # fmt: skip
    return rows


def test_0016_converts_the_stored_tiles_and_builds_the_missing_ones(db_url: str) -> None:
    """0016 moves 0015's tiles into chunks as they are, without reading the metric rows again
    (a tile changed on purpose stays changed), and builds the tiles of trial groups that have
    none (trial 1's validations, trial 2) from their metric rows."""
    db = Database(db_url)
    upgrade_to(db, "0015")
    _fill_0006(db)
    rows = _old_layout_tiles(db, 1, "training", 2)
    marked = rows[len(rows) // 2]
    marked["max_y"] += 1000.0  # not what the raw rows give: only a conversion keeps it
    with db.engine.begin() as conn:
        conn.exec_driver_sql(
            "UPDATE metric_tiles SET max_y = max_y + 1000 WHERE trial_id = 1 AND metric = "
            f"'{marked['metric']}' AND level = {marked['level']} AND bucket = {marked['bucket']}"
        )
    db.migrate()
    with db.engine.connect() as conn:
        converted = _tile_reads.trial_tiles(conn, 1)
    want: dict[tuple[str, str, int], list[tuple[Any, ...]]] = {}
    for row in rows:
        want.setdefault((row["metric_group"], row["metric"], row["level"]), []).append(
            tuple(row[name] for name in _OLD_TILE)
        )
    assert {k: v for k, v in converted.items() if k[0] == "training"} == want
    problems = tile_mismatches(db, 1)
    assert len(problems) == 1 and f"level {marked['level']}" in problems[0], problems
    assert tile_mismatches(db, 2) == []
    with db.engine.connect() as conn:
        series = conn.exec_driver_sql(
            "SELECT trial_id, metric_group, run_id, x_min, x_max FROM metric_tile_series "
            "ORDER BY trial_id, metric_group"
        ).all()
    assert [tuple(r) for r in series] == [
        (1, "training", 2, 1, 4197),
        (1, "validation", 2, 1000, 4100),
        (2, "training", 1, 5, 15),
    ]
    db.close()
