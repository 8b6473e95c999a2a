"""The master's services on their own: each works with only what its constructor takes.

The metrics writer needs a transaction callable and a validation callback, not the master; metric
bodies are refused at the API edge with a 400 naming the field, before they reach the writer.
"""

from __future__ import annotations

import pathlib
from typing import Any

import pytest

from determined.master._api._metric_reports import parse_report, parse_reports
from determined.master._core._metrics_writer import MetricsWriter
from determined.master._wire import APIError
from determined.master.db import Database, Experiment, Metric, Run, User


@pytest.fixture
def database(tmp_path: pathlib.Path) -> Any:
    db = Database(f"sqlite:///{tmp_path / 'det.sqlite'}")
    db.migrate()
    yield db
    db.close()


def _trial(db: Database) -> int:
    with db.write() as session:
        user = User(username="someone", admin=False, password_hash="")
        session.add(user)
        session.flush()
        exp = Experiment(
            state="ACTIVE",
            config={"searcher": {"metric": "loss", "smaller_is_better": True}},
            original_config="",
            owner_id=user.id,
            project_id=1,
            labels=[],
            notes="",
            priority=42,
            weight=1.0,
            progress=0.0,
        )
        session.add(exp)
        session.flush()
        run = Run(
            experiment_id=exp.id,
            request_id="r1",
            task_id=f"{exp.id}.r1",
            state="ACTIVE",
            hparams={},
            seed=1,
            summary_metrics={},
            metadata_={},
            run_id=1,
        )
        session.add(run)
        session.flush()
        return run.id


def _body(steps: int, loss: float, run_id: int | None = 1) -> dict[str, Any]:
    body: dict[str, Any] = {"stepsCompleted": steps, "metrics": {"avgMetrics": {"loss": loss}}}
    if run_id is not None:
        body["trialRunId"] = run_id
    return body


def test_metrics_writer_needs_only_a_transaction_and_a_validation_callback(
    database: Database,
) -> None:
    trial_id = _trial(database)
    heard: list[tuple[int, list[float]]] = []

    def on_validation(session: Any, run: Run, rows: list[Metric]) -> None:
        heard.append((run.id, [row.metrics["avg_metrics"]["loss"] for row in rows]))

    writer = MetricsWriter(database.write, on_validation)
    try:
        writer.write(
            trial_id,
            parse_reports(
                [("training", _body(1, 0.9)), ("validation", _body(2, 0.5, run_id=None))]
            ),
        )
        writer.write(trial_id, [parse_report("validation", _body(4, 0.25))])
        with pytest.raises(APIError) as stale:
            writer.write(trial_id, [parse_report("training", _body(5, 0.1, run_id=7))])
        assert stale.value.status == 400
        assert "invalid run id, 7 (reported) != 1 (expected)" in str(stale.value)
        with pytest.raises(APIError) as missing:
            writer.write(trial_id + 100, [parse_report("training", _body(1, 0.1))])
        assert missing.value.status == 404
    finally:
        writer.close()
    assert heard == [(trial_id, [0.5]), (trial_id, [0.25])]
    with database.read() as session:
        run = session.get(Run, trial_id)
        assert run is not None
        assert run.total_batches == 4
        assert run.searcher_metric_value == 0.25
        assert run.summary_metrics["training"]["loss"]["count"] == 1


@pytest.mark.parametrize(
    "group, body, message",
    [
        ("", _body(1, 0.1), "group: must be a non-empty string"),
        (["training"], _body(1, 0.1), "group: must be a non-empty string"),  # not hashable
        ({"a": 1}, _body(1, 0.1), "group: must be a non-empty string"),
        ("a.b", _body(1, 0.1), "group: 'a.b' must not contain '.'"),
        ("training", [], "reports[0].metrics: must be an object"),
        ("training", {"trialRunId": "x"}, "metrics.trialRunId: must be an integer"),
        ("training", {"stepsCompleted": "many"}, "metrics.stepsCompleted: must be an integer"),
        ("training", {"metrics": "x"}, "metrics.metrics: must be an object"),
        (
            "training",
            {"metrics": {"avgMetrics": {"epoch": "one"}}},
            "metrics.metrics.avgMetrics.epoch: must be a number",
        ),
    ],
)
def test_metric_bodies_are_refused_at_the_edge(group: Any, body: Any, message: str) -> None:
    with pytest.raises(APIError) as refused:
        parse_reports([(group, body)])
    assert refused.value.status == 400
    assert message in str(refused.value)


def test_batch_errors_name_the_report() -> None:
    with pytest.raises(APIError) as refused:
        parse_reports([("training", _body(1, 0.1)), ("training", {"stepsCompleted": "x"})])
    assert "reports[1].metrics.stepsCompleted: must be an integer" in str(refused.value)
