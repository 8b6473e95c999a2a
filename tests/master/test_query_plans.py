"""No per-trial statement reads a whole growing table.

A statement the master runs for every trial (its launch, its requests, its exit) or for every read
of an experiment must find its rows through an index: a full scan of a table that gains rows with
every trial (allocations, user sessions, runs, logs, metrics...) makes each trial of a long search
slower than the one before. Two such scans were found this way (the revocation of a trial's user
session by its description, an experiment's live allocations joined through an unindexed column).

The test runs real trials (Core API: searcher operations, metrics, a checkpoint) and reads the
experiment as a client would, records every statement the master's engine runs meanwhile, and asks
SQLite for each statement's plan (``EXPLAIN QUERY PLAN`` on the master's own database file).
"""

from __future__ import annotations

import pathlib
import sqlite3
from typing import Any

from sqlalchemy import event

GROWING = {
    "allocations",
    "checkpoints_v2",
    "metric_tile_series",
    "metric_tiles",
    "metrics",
    "runs",
    "searcher_events",
    "task_logs",
    "tasks",
    "user_sessions",
}
"""Tables that gain rows with every trial."""

TRIAL = """
import determined as det

with det.core.init() as core:
    for op in core.searcher.operations():
        core.train.report_training_metrics(steps_completed=op.length, metrics={"loss": 1.0})
        core.train.report_validation_metrics(steps_completed=op.length, metrics={"loss": 0.5})
        with core.checkpoint.store_path({"steps_completed": op.length}) as (path, _):
            (path / "weights").write_text("w")
        op.report_completed(0.5)
"""


def _scans(plan: list[tuple[Any, ...]]) -> list[str]:
    """The full scans of growing tables in a plan (``SCAN t``, not ``SCAN t USING INDEX``)."""
    out = []
    for row in plan:
        detail = str(row[-1])
        words = detail.split()
        if words[:1] == ["SCAN"] and words[1:2] and words[1] in GROWING and "USING" not in words:
            out.append(detail)
    return out


def test_per_trial_statements_use_indexes(
    sqlite_master: Any, api: Any, tmp_path: pathlib.Path
) -> None:
    context = tmp_path / "context"
    context.mkdir()
    (context / "trial.py").write_text(TRIAL)
    config = {
        "name": "query-plans",
        "entrypoint": "python3 trial.py",
        "hyperparameters": {"x": {"type": "categorical", "vals": [1, 2]}},
        "searcher": {"name": "grid", "metric": "loss", "max_length": 2},
        "max_restarts": 0,
    }
    statements: dict[str, Any] = {}

    def record(
        _conn: Any, _cursor: Any, statement: str, params: Any, _ctx: Any, many: bool
    ) -> None:
        if statement.split(None, 1)[0].upper() in ("SELECT", "UPDATE", "DELETE", "INSERT", "WITH"):
            statements.setdefault(statement, params[0] if many and params else params)

    engine = sqlite_master.db.engine
    event.listen(engine, "before_cursor_execute", record)
    try:
        exp_id = api.create_experiment(config, context)
        assert api.wait_experiment(exp_id, timeout=180) == "STATE_COMPLETED", api.debug(exp_id)
        trials = api.trials(exp_id)
        api.get(f"/api/v1/experiments/{exp_id}")
        api.get(f"/api/v1/trials/{trials[0]['id']}")
        api.get(f"/api/v1/experiments/{exp_id}/checkpoints")
    finally:
        event.remove(engine, "before_cursor_execute", record)
    assert len(trials) == 2

    path = sqlite_master.db.url.split("///", 1)[1]
    found: list[str] = []
    with sqlite3.connect(path) as connection:
        for statement, params in statements.items():
            plan = connection.execute(f"EXPLAIN QUERY PLAN {statement}", params or ()).fetchall()
            text = " ".join(statement.split())
            found += [f"{scan}: ...{text[text.find(' FROM ') :][:400]}" for scan in _scans(plan)]
    assert len(statements) > 30, sorted(statements)  # the trials' paths were recorded
    assert not found, "\n".join(found)
