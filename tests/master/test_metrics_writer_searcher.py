"""The metrics writer reads each experiment's ``searcher.metric`` and ``searcher.smaller_is_better``
from its config (in SQL, not by decoding the config) and keeps each trial's best validation in
that direction; with ``smaller_is_better`` left out, smaller is better. SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest
from db_rows import experiment_with_runs

from determined.master._api._metric_reports import parse_reports
from determined.master._core._metrics_writer import MetricsWriter
from determined.master.db import Database, Run


def _validation(step: int, values: dict[str, Any]) -> list[Any]:
    body = {"trialRunId": 1, "stepsCompleted": step, "metrics": {"avgMetrics": values}}
    return parse_reports([("validation", body)])


@pytest.mark.parametrize(
    ("searcher", "best"),
    [
        ({"metric": "acc", "smaller_is_better": False}, 0.9),
        ({"metric": "acc", "smaller_is_better": True}, 0.2),
        ({"metric": "acc"}, 0.2),
        ({"metric": "loss"}, None),  # a metric no report names: no best
    ],
)
def test_the_best_validation_follows_the_experiments_searcher(
    db_url: str, searcher: dict[str, Any], best: float | None
) -> None:
    db = Database(db_url)
    try:
        db.migrate()
        _, (trial,) = experiment_with_runs(db, 1, config={"searcher": searcher})
        writer = MetricsWriter(db.write, lambda *args: None)
        try:
            for step, acc in ((1, 0.5), (2, 0.9), (3, 0.2), (4, 0.7)):
                writer.write(trial, _validation(step, {"acc": acc}))
        finally:
            writer.close()
        with db.read() as session:
            run = session.get(Run, trial)
            assert run is not None
            assert run.searcher_metric_value == best
    finally:
        db.close()
