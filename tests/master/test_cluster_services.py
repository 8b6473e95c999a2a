"""The services behind checkpoint metrics, cluster messages and resource usage, on their own, on
SQLite and PostgreSQL (the migration that adds their tables included)."""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from typing import Any

import pytest

from determined.master._core._cluster_messages import ClusterMessages, parse_duration
from determined.master._core._trial_sources import SourceInfo, TrialSources, source_type
from determined.master._core._usage import ResourceUsage
from determined.master._wire import APIError
from determined.master.db import (
    Allocation,
    Checkpoint,
    Database,
    Experiment,
    Metric,
    Model,
    ModelVersion,
    Run,
    User,
    utcnow,
)

UTC = datetime.timezone.utc


@pytest.fixture
def database(db_url: str) -> Iterator[Database]:
    db = Database(db_url)
    db.migrate()
    yield db
    db.close()


def _experiment(db: Database, username: str, labels: list[str]) -> tuple[int, int]:
    """A user, an experiment and its trial: (experiment id, trial id)."""
    with db.write() as session:
        user = User(username=username, admin=False, password_hash="")
        session.add(user)
        session.flush()
        exp = Experiment(
            state="ACTIVE",
            config={"name": username},
            original_config="",
            owner_id=user.id,
            labels=labels,
            job_id="",
        )
        session.add(exp)
        session.flush()
        exp.job_id = f"exp-{exp.id}"
        run = Run(experiment_id=exp.id, request_id="r", task_id=f"{exp.id}.r", run_id=1)
        session.add(run)
        session.flush()
        return exp.id, run.id


def _report(db: Database, trial_id: int, group: str, steps: int, values: dict[str, Any]) -> None:
    key = "validation_metrics" if group == "validation" else "avg_metrics"
    with db.write() as session:
        session.add(
            Metric(
                trial_id=trial_id,
                trial_run_id=1,
                group=group,
                total_batches=steps,
                metrics={key: values},
            )
        )


def test_trial_sources_link_trials_to_checkpoints_and_versions(database: Database) -> None:
    _exp, source_trial = _experiment(database, "trainer", [])
    _exp2, by_checkpoint = _experiment(database, "infer-a", [])
    _exp3, by_version = _experiment(database, "infer-b", [])
    with database.write() as session:
        session.add(Checkpoint(uuid="ck-1", trial_id=source_trial, steps_completed=3))
        model = Model(name="m")
        session.add(model)
        session.flush()
        session.add(ModelVersion(model_id=model.id, version=1, checkpoint_uuid="ck-1"))
        model_id = model.id
    for step in range(1, 1502):  # more than upstream's 1000 per trial
        _report(database, by_checkpoint, "inference", step, {"n": step})
    _report(database, by_checkpoint, "validation", 5, {"acc": 0.5})
    _report(database, by_version, "inference", 1, {"n": -1})

    sources = TrialSources(database)
    inference = source_type("INFERENCE")
    sources.record(SourceInfo(by_checkpoint, "ck-1", inference))
    sources.record(SourceInfo(by_version, "ck-1", inference, model_id=model_id, model_version=1))
    sources.record(SourceInfo(by_version, "ck-1", inference))  # a repeat keeps the version

    rows = sources.checkpoint_metrics("ck-1", None, "inference")
    assert len(rows) == 1501 + 1
    assert [r.total_batches for r in rows if r.trial_id == by_checkpoint] == list(range(1, 1502))
    every = sources.checkpoint_metrics("ck-1", inference, None)
    assert {r.group for r in every} == {"inference", "validation"}
    assert sources.checkpoint_metrics("ck-1", source_type(2), None) == []  # fine-tuning: none
    versions = sources.model_version_metrics("m", 1, inference, None)
    assert [(r.trial_id, r.metrics) for r in versions] == [(by_version, {"avg_metrics": {"n": -1}})]
    assert sources.model_version_metrics(str(model_id), 1, None, "inference") == versions

    with pytest.raises(APIError, match="checkpoint no-such not found"):
        sources.checkpoint_metrics("no-such", None, None)
    with pytest.raises(APIError, match="not found"):
        sources.model_version_metrics("m", 2, None, None)
    with pytest.raises(APIError, match="trial 999 not found"):
        sources.record(SourceInfo(999, "ck-1", inference))
    with pytest.raises(APIError, match="trialSourceInfoType"):
        source_type("TRAINING")
    assert source_type(None) == "TRIAL_SOURCE_INFO_TYPE_UNSPECIFIED"


def test_cluster_messages(database: Database) -> None:
    messages = ClusterMessages(database)
    assert messages.current() is None and messages.active() is None
    first = messages.set("hello", 1, duration="90m")
    assert first.end_time is not None and first.end_time - first.start_time == datetime.timedelta(
        minutes=90
    )
    assert messages.active() == messages.current()
    active = messages.active()
    assert active is not None and active.message == "hello"

    tomorrow = utcnow() + datetime.timedelta(days=1)
    offset = datetime.timezone(datetime.timedelta(hours=2))
    later = messages.set("later", 1, start_time=tomorrow.astimezone(offset))
    assert later.start_time.tzinfo is not None
    current = messages.current()
    assert current is not None and current.message == "later"
    assert abs((current.start_time - tomorrow).total_seconds()) < 1  # stored in UTC
    assert messages.active() is None  # the first one ended when the second was set

    messages.clear()
    assert messages.current() is None and messages.active() is None

    for kwargs, text in (
        ({"duration": "1h", "end_time": tomorrow}, "mutually exclusive"),
        ({"end_time": utcnow() - datetime.timedelta(hours=1)}, "end time must be after"),
        ({"duration": "-1h"}, "positive duration"),
    ):
        with pytest.raises(APIError, match=text):
            messages.set("x", 1, **kwargs)
    with pytest.raises(APIError, match="at most 250"):
        messages.set("x" * 251, 1)
    assert parse_duration("1w2d3h4m5s") == datetime.timedelta(days=9, hours=3, minutes=4, seconds=5)
    assert parse_duration("1.5h") == datetime.timedelta(minutes=90)
    for bad in ("", "5", "5x", "h", "1h 2m"):
        with pytest.raises(APIError):
            parse_duration(bad)


def test_resource_usage(database: Database) -> None:
    exp_a, trial_a = _experiment(database, "ann", ["vision"])
    _exp_b, trial_b = _experiment(database, "bob", [])
    day = datetime.datetime(2024, 3, 10, tzinfo=UTC)
    with database.write() as session:
        session.add_all(
            [
                # 2 slots for 1 h across midnight: 30 min on each day
                Allocation(
                    allocation_id="a.1",
                    task_id=f"{exp_a}.r",
                    trial_id=trial_a,
                    slots=2,
                    start_time=day - datetime.timedelta(minutes=30),
                    end_time=day + datetime.timedelta(minutes=30),
                ),
                Allocation(
                    allocation_id="b.1",
                    task_id="b",
                    trial_id=trial_b,
                    slots=1,
                    start_time=day + datetime.timedelta(hours=2),
                    end_time=day + datetime.timedelta(hours=3),
                ),
                Allocation(allocation_id="c.1", task_id="c", slots=1),  # never started
            ]
        )
    usage = ResourceUsage(database)
    found = usage.allocations(day, day + datetime.timedelta(days=1))
    assert [(u.allocation_id, u.seconds, u.slot_seconds) for u in found] == [
        ("a.1", 1800.0, 3600.0),
        ("b.1", 3600.0, 3600.0),
    ]
    assert found[0].username == "ann" and found[0].labels == ["vision"]
    assert found[0].experiment_id == exp_a

    daily = usage.aggregated(datetime.date(2024, 3, 9), datetime.date(2024, 3, 10), monthly=False)
    assert [(p.start, p.seconds) for p in daily] == [
        (datetime.date(2024, 3, 9), 3600.0),
        (datetime.date(2024, 3, 10), 7200.0),
    ]
    assert daily[1].by_username == {"ann": 3600.0, "bob": 3600.0}
    assert daily[1].by_experiment_label == {"vision": 3600.0}
    assert daily[1].by_resource_pool == {"default": 7200.0}
    monthly = usage.aggregated(datetime.date(2024, 3, 1), datetime.date(2024, 3, 1), monthly=True)
    assert [(p.start, p.seconds) for p in monthly] == [(datetime.date(2024, 3, 1), 10800.0)]
    with pytest.raises(APIError, match="start date cannot be after end date"):
        usage.aggregated(datetime.date(2024, 3, 2), datetime.date(2024, 3, 1), monthly=False)
    with pytest.raises(APIError, match="start time cannot be after end time"):
        usage.allocations(day, day - datetime.timedelta(days=1))
