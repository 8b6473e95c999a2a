"""Batched metric ingestion on a real PostgreSQL (the COPY path of the metrics writer).

One master on a fresh PostgreSQL database for the module; trials are zero-slot processes that just
wait (writing their pid, so a test can kill one), and the tests post reports as those trials over
HTTP, then read both the API and the ``metrics`` table itself: every report stored exactly once, in
the order it was sent, under concurrent trials, small requests among large ones, rollbacks (a
restarted trial's reports supersede the older run's from its first step on) and text that COPY must
escape.
"""

from __future__ import annotations

import datetime
import os
import pathlib
import signal
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy
from postgres_db import drop_database, postgres_url

from determined.master.db._metric_inserts import FEW_METRIC_ROWS

pytestmark = pytest.mark.postgres

WAIT_SCRIPT = """
import json, os, pathlib, time
info = json.load(open(os.environ["DET_CLUSTER_INFO"]))
trial = info["trial_info"]
pid_dir = pathlib.Path(trial["hparams"]["pid_dir"])
(pid_dir / f"{trial['trial_id']}.{trial['trial_run_id']}.pid").write_text(str(os.getpid()))
time.sleep(600)
"""


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    url = postgres_url()
    yield url
    drop_database(url)


@pytest.fixture(scope="module")
def pg_master(pg_url: str, make_module_master: Any) -> Iterator[Any]:
    handle = make_module_master(pg_url)
    yield handle
    handle.stop()  # before the database is dropped


@pytest.fixture(scope="module")
def engine(pg_url: str) -> Iterator[sqlalchemy.Engine]:
    engine = sqlalchemy.create_engine(pg_url)
    yield engine
    engine.dispose()


def _start_trials(
    api: Any, tmp: pathlib.Path, count: int, max_restarts: int = 0
) -> list[tuple[int, int]]:
    """An experiment of ``count`` waiting trials; their ``(trial id, run id)`` once all run."""
    context = tmp / "context"
    context.mkdir()
    (context / "wait.py").write_text(WAIT_SCRIPT)
    pid_dir = tmp / "pids"
    pid_dir.mkdir()
    config = {
        "name": "ingest-pg",
        "entrypoint": "python3 wait.py",
        "searcher": {
            "name": "random",
            "metric": "loss",
            "max_trials": count,
            "max_concurrent_trials": count,
        },
        "hyperparameters": {"pid_dir": str(pid_dir)},
        "resources": {"slots_per_trial": 0},
        "max_restarts": max_restarts,
    }
    exp = api.create_experiment(config, context)

    def running() -> list[tuple[int, int]] | None:
        trials = api.trials(exp)
        ready = [
            (int(t["id"]), int(t["trialRunId"]))
            for t in trials
            if t["state"] in ("STATE_RUNNING", "STATE_ACTIVE")
        ]
        pids = list(pid_dir.glob("*.pid"))
        return sorted(ready) if len(ready) == count and len(pids) >= count else None

    return api.wait_for(running, 120, f"{count} running trials")  # type: ignore[no-any-return]


def _report(trial: int, run: int, step: int, group: str = "training", **values: Any) -> Any:
    metrics = values or {"loss": 1.0 / step, "step": step}
    return {
        "group": group,
        "metrics": {
            "trialId": trial,
            "trialRunId": run,
            "stepsCompleted": step,
            "metrics": {"avgMetrics": metrics},
        },
    }


def _post_batch(api: Any, trial: int, reports: list[Any]) -> Any:
    return api.post(f"/api/v1/trials/{trial}/metrics/batch", {"reports": reports})


def _stored(engine: sqlalchemy.Engine, trial: int) -> list[tuple[int, int, str, bool]]:
    """``(run id, step, group, archived)`` of a trial's rows in insertion (id) order."""
    with engine.connect() as connection:
        rows = connection.execute(
            sqlalchemy.text(
                "SELECT trial_run_id, total_batches, metric_group, archived FROM metrics "
                "WHERE trial_id = :t ORDER BY id"
            ),
            {"t": trial},
        )
        return [(int(r), int(s), str(g), bool(a)) for r, s, g, a in rows]


def test_concurrent_trials_every_row_once_in_order(
    pg_master: Any, engine: sqlalchemy.Engine, tmp_path: pathlib.Path
) -> None:
    """Four trials post batches (and single reports in between) at once: each trial's rows are all
    there, once each, in the order sent; validations count as reports too; summaries add up."""
    api = pg_master.api()
    trials = _start_trials(api, tmp_path, 4)
    requests_per_trial, batch = 12, 40
    errors: list[BaseException] = []

    def ship(trial: int, run: int) -> None:
        try:
            step = 0
            for n in range(requests_per_trial):
                reports = []
                for _ in range(batch):
                    step += 1
                    reports.append(_report(trial, run, step))
                reports.append(_report(trial, run, step, "validation", loss=1.0 / step))
                _post_batch(api, trial, reports)
                if n % 3 == 0:  # a small request among the large ones
                    step += 1
                    api.post(f"/api/v1/trials/{trial}/metrics", _report(trial, run, step))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=ship, args=trial) for trial in trials]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors

    total_training = requests_per_trial * batch + (requests_per_trial + 2) // 3
    for trial, run in trials:
        rows = _stored(engine, trial)
        training = [step for r, step, group, archived in rows if group == "training"]
        assert training == list(range(1, total_training + 1))
        assert all(r == run and not archived for r, _, _, archived in rows)
        validations = [step for _, step, group, _ in rows if group == "validation"]
        assert len(validations) == requests_per_trial
        assert validations == sorted(validations)
        assert api.steps(api.metrics(trial, "training")) == training
        summary = api.get(f"/api/v1/trials/{trial}")["trial"]["summaryMetrics"]
        loss = summary["avg_metrics"]["loss"]
        assert loss["count"] == total_training
        assert loss["min"] == pytest.approx(1.0 / total_training)
        assert loss["max"] == 1.0
        assert summary["avg_metrics"]["step"]["sum"] == total_training * (total_training + 1) / 2


def test_rollback_supersedes_older_run(
    pg_master: Any, engine: sqlalchemy.Engine, tmp_path: pathlib.Path
) -> None:
    """A trial killed after step 60 restarts as run 2 from step 31: run 1's rows from step 31 on are
    archived (kept, hidden from readers), run 2's rows follow, and run 1 can no longer report."""
    api = pg_master.api()
    ((trial, run),) = _start_trials(api, tmp_path, 1, max_restarts=1)
    assert run == 1
    _post_batch(api, trial, [_report(trial, 1, s) for s in range(1, 31)])
    _post_batch(api, trial, [_report(trial, 1, s) for s in range(31, 61)])

    pid = int((tmp_path / "pids" / f"{trial}.1.pid").read_text())
    os.kill(pid, signal.SIGKILL)
    api.wait_for(
        lambda: (
            (tmp_path / "pids" / f"{trial}.2.pid").exists()
            and int(api.get(f"/api/v1/trials/{trial}")["trial"]["trialRunId"]) == 2
        ),
        120,
        "the trial's second run",
    )
    _post_batch(api, trial, [_report(trial, 2, s) for s in range(31, 51)])
    with pytest.raises(Exception, match="400|invalid run id"):
        _post_batch(api, trial, [_report(trial, 1, 61)])

    rows = _stored(engine, trial)
    assert [(r, s) for r, s, _, archived in rows if archived] == [(1, s) for s in range(31, 61)]
    visible = [(r, s) for r, s, _, archived in rows if not archived]
    assert visible == [(1, s) for s in range(1, 31)] + [(2, s) for s in range(31, 51)]
    assert api.steps(api.metrics(trial, "training")) == list(range(1, 51))


def test_text_copy_must_escape_round_trips(
    pg_master: Any, engine: sqlalchemy.Engine, tmp_path: pathlib.Path
) -> None:
    """Group names and string values with backslashes, tabs, newlines and non-ASCII text come back
    exactly as sent (COPY's text format gives those characters a meaning), and so does the report
    time, whether the rows went in by COPY (a large batch) or by one INSERT (a few rows)."""
    api = pg_master.api()
    ((trial, run),) = _start_trials(api, tmp_path, 1)
    odd = "back\\slash\ttab\nnewline \u00e9\u4e2d \\N"
    group = "odd\\group \u00e9"
    sizes = (3, FEW_METRIC_ROWS + 30)  # an INSERT, then a COPY
    when = ["2026-11-30T01:02:03.456789Z", "2026-11-30T04:05:06.5+02:00"]
    step = 0
    for size, time_sent in zip(sizes, when, strict=True):
        reports = []
        for _ in range(size):
            step += 1
            report = _report(trial, run, step, group, note=odd, x=float(step))
            report["metrics"]["reportTime"] = time_sent
            reports.append(report)
        _post_batch(api, trial, reports)
    read = api.metrics(trial, group)
    assert api.steps(read) == list(range(1, step + 1))
    assert [api.values(r)["note"] for r in read] == [odd] * step
    assert [g for _, _, g, _ in _stored(engine, trial)] == [group] * step
    with engine.connect() as connection:
        times = connection.execute(
            sqlalchemy.text("SELECT end_time FROM metrics WHERE trial_id = :t ORDER BY id"),
            {"t": trial},
        ).scalars()
        expected = [datetime.datetime.fromisoformat(t) for t in when]
        assert list(times) == [expected[0]] * sizes[0] + [expected[1]] * sizes[1]
