"""The procedures docs/postgresql.md gives, run as written on a real PostgreSQL: the metrics table
partitioned by trial id ranges keeps ingestion and reads working, and the SQLite → PostgreSQL copy
moves a master's data (then the master goes on with new ids)."""

from __future__ import annotations

import pathlib
import re
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy
from postgres_db import drop_database, postgres_url

pytestmark = pytest.mark.postgres

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "postgresql.md"

WAIT_SCRIPT = "import time\ntime.sleep(600)\n"


def _block(language: str) -> str:
    """The first ``language`` code block of docs/postgresql.md, de-indented."""
    match = re.search(rf"^( *)```{language}\n(.*?)^\1```", DOC.read_text(), re.M | re.S)
    assert match, f"no {language} block in {DOC}"
    indent = len(match.group(1))
    return "\n".join(line[indent:] for line in match.group(2).splitlines())


@pytest.fixture
def pg_url() -> Iterator[str]:
    url = postgres_url()
    yield url
    drop_database(url)


def _running_trial(api: Any, tmp: pathlib.Path) -> tuple[int, int, int]:
    """``(experiment, trial, run)`` of a one-trial experiment whose process waits."""
    context = tmp / "context"
    context.mkdir()
    (context / "wait.py").write_text(WAIT_SCRIPT)
    config = {
        "name": "migrate-me",
        "entrypoint": "python3 wait.py",
        "searcher": {"name": "single", "metric": "loss", "max_length": 10},
        "resources": {"slots_per_trial": 0},
        "max_restarts": 0,
    }
    exp = api.create_experiment(config, context)

    def running() -> tuple[int, int] | None:
        trials = [t for t in api.trials(exp) if t["state"] in ("STATE_RUNNING", "STATE_ACTIVE")]
        return (int(trials[0]["id"]), int(trials[0]["trialRunId"])) if trials else None

    trial, run = api.wait_for(running, 120, "a running trial")
    return exp, trial, run


def _post(api: Any, trial: int, run: int, steps: range, group: str = "training") -> None:
    reports = [
        {
            "group": group,
            "metrics": {
                "trialId": trial,
                "trialRunId": run,
                "stepsCompleted": s,
                "metrics": {"avgMetrics": {"loss": 1.0 / s}},
            },
        }
        for s in steps
    ]
    api.post(f"/api/v1/trials/{trial}/metrics/batch", {"reports": reports})


def test_partitioned_metrics_table_keeps_ingesting(
    pg_url: str, make_master: Any, tmp_path: pathlib.Path
) -> None:
    """The documented partitioning SQL, applied to a master's live database: COPY lands in the
    partition, validations (ORM inserts returning ids) too, reads see old and new rows in order."""
    handle = make_master(pg_url)
    try:
        api = handle.api()
        _, trial, run = _running_trial(api, tmp_path)
        _post(api, trial, run, range(1, 11))
        engine = sqlalchemy.create_engine(pg_url)
        try:
            with engine.begin() as connection:
                id_type = connection.exec_driver_sql(
                    "SELECT data_type FROM information_schema.columns "
                    "WHERE table_name = 'metrics' AND column_name = 'id'"
                ).scalar_one()
                for statement in _block("sql").split(";"):
                    sql = "\n".join(
                        line for line in statement.splitlines() if not line.strip().startswith("--")
                    ).strip()
                    if sql and sql not in ("BEGIN", "COMMIT"):
                        connection.exec_driver_sql(sql)
            _post(api, trial, run, range(11, 21))
            _post(api, trial, run, range(20, 21), "validation")
            with engine.connect() as connection:
                kind = connection.exec_driver_sql(
                    "SELECT relkind FROM pg_class WHERE relname = 'metrics'"
                ).scalar_one()
                in_partition = connection.exec_driver_sql(
                    "SELECT count(*) FROM metrics_0 WHERE trial_id = %s", (trial,)
                ).scalar_one()
        finally:
            engine.dispose()
        assert id_type == "bigint"  # migration 0009
        assert kind == "p"  # partitioned
        assert in_partition == 21
        assert api.steps(api.metrics(trial, "training")) == list(range(1, 21))
        assert api.steps(api.metrics(trial, "validation")) == [20]
    finally:
        handle.stop()


def test_sqlite_to_postgres_copy(pg_url: str, make_master: Any, tmp_path: pathlib.Path) -> None:
    """A SQLite master's experiment, trial and metrics, copied by the documented script, are served
    by a master on PostgreSQL, which then creates new rows without id clashes."""
    sqlite_url = f"sqlite:///{tmp_path / 'det.sqlite'}"
    old = make_master(sqlite_url, data_dir=tmp_path / "data")
    api = old.api()
    exp, trial, run = _running_trial(api, tmp_path)
    _post(api, trial, run, range(1, 31))
    _post(api, trial, run, range(30, 31), "validation")
    api.post(f"/api/v1/experiments/{exp}/kill")
    api.wait_experiment(exp)
    old.stop()

    script = _block("python")
    script = re.sub(r'SQLITE = ".*"', f"SQLITE = {sqlite_url!r}", script)
    script = re.sub(r'POSTGRES = ".*"', f"POSTGRES = {pg_url!r}", script)
    exec(compile(script, str(DOC), "exec"), {})

    new = make_master(pg_url, data_dir=tmp_path / "data")
    try:
        api = new.api()
        assert api.experiment(exp)["name"] == "migrate-me"
        assert api.steps(api.metrics(trial, "training")) == list(range(1, 31))
        assert api.steps(api.metrics(trial, "validation")) == [30]
        context = tmp_path / "context2"
        context.mkdir()
        (context / "wait.py").write_text(WAIT_SCRIPT)
        config = {
            "name": "after",
            "entrypoint": "python3 wait.py",
            "searcher": {"name": "single", "metric": "loss", "max_length": 10},
            "resources": {"slots_per_trial": 0},
        }
        assert api.create_experiment(config, context, activate=False) > exp
    finally:
        new.stop()
