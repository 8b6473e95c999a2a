"""A database made at migration 0006 upgrades in place to the metric tiles (0007): the tiles are
backfilled from the existing unarchived metric rows (archived reports of rolled-back runs left
out), on SQLite and on PostgreSQL, and a master started on it draws the curves from them."""

from __future__ import annotations

import math
from typing import Any

import requests
from master.test_metric_tiles import tile_mismatches
from old_schema import EXPERIMENTS, METRICS, NOW, RUNS, USERS, upgrade_to

from determined.master._core._metric_tiles import level_min
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
