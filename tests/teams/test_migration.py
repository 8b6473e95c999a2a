"""An existing det database upgrades in place to the teams schema (migration 0006).

The database is built the way the release before teams left it: Alembic up to revision 0005, then
users, experiments (one with a project id that never existed), trials, metrics, checkpoints, a model,
a login session and a command written with 0005's columns. Upgrading to head must keep every row,
put every experiment into project ``Uncategorized`` of workspace ``Uncategorized``, and a master
started on it must serve them there — on SQLite and on PostgreSQL.
"""

from __future__ import annotations

from typing import Any

from old_schema import (
    CHECKPOINTS,
    EXPERIMENTS,
    METRICS,
    MODELS,
    NOW,
    NTSC,
    RUNS,
    SESSIONS,
    USERS,
    upgrade_to,
)

from determined.client import Client, Session
from determined.master.db import Database

CONFIG = {
    "name": "old-exp",
    "entrypoint": "python3 train.py",
    "searcher": {"name": "single", "metric": "loss", "max_length": {"batches": 2}},
    "hyperparameters": {},
    "resources": {"slots_per_trial": 1},
}


def _experiment_row(exp_id: int, project_id: int = 1, owner: int = 1) -> dict[str, Any]:
    return {"id": exp_id, "state": "COMPLETED", "config": dict(CONFIG, name=f"old-{exp_id}"),
            "original_config": "", "start_time": NOW, "end_time": NOW, "archived": False,
            "owner_id": owner, "project_id": project_id, "job_id": f"exp-{exp_id}", "notes": "",
            "labels": ["old"], "priority": 42, "weight": 1.0, "unmanaged": False}  # fmt: skip


def _run_row(exp_id: int) -> dict[str, Any]:
    return {"id": exp_id, "experiment_id": exp_id, "request_id": f"r{exp_id}",
            "task_id": f"{exp_id}.r{exp_id}", "state": "COMPLETED", "start_time": NOW,
            "end_time": NOW, "hparams": {}, "seed": 1, "run_id": 1, "restarts": 0,
            "total_batches": 2, "summary_metrics": {}, "runner_state": "", "metadata": {},
            "early_stopped_by_searcher": False, "archived": False}  # fmt: skip


def _fill_release_0005(db: Database) -> None:
    """Rows as the 0005 release wrote them (only 0005's columns)."""
    users = [
        {"id": 1, "username": "admin", "admin": True},
        {"id": 2, "username": "determined", "admin": False},
        {"id": 3, "username": "alice", "admin": False},
    ]
    experiments, runs, metrics, checkpoints = [], [], [], []
    for exp_id, project_id, owner in ((1, 1, 2), (2, 1, 3), (3, 7, 3)):
        experiments.append(_experiment_row(exp_id, project_id, owner))
        runs.append(_run_row(exp_id))
        metrics.append(
            {"trial_id": exp_id, "trial_run_id": 1, "metric_group": "validation",
             "total_batches": 2, "end_time": NOW, "metrics": {"validation_metrics": {"loss": 0.5}},
             "archived": False}
        )  # fmt: skip
        checkpoints.append(
            {"uuid": f"uuid-{exp_id}", "task_id": f"{exp_id}.r{exp_id}", "report_time": NOW,
             "state": "COMPLETED", "resources": {"a": 1}, "metadata": {}, "size": 1,
             "trial_id": exp_id, "experiment_id": exp_id, "steps_completed": 2}
        )  # fmt: skip
    with db.engine.begin() as conn:
        conn.execute(
            USERS.insert(),
            [u | {"password_hash": "", "active": True, "remote": False, "modified_at": NOW}
             for u in users],
        )  # fmt: skip
        conn.execute(EXPERIMENTS.insert(), experiments)
        conn.execute(RUNS.insert(), runs)
        conn.execute(METRICS.insert(), metrics)
        conn.execute(CHECKPOINTS.insert(), checkpoints)
        conn.execute(
            MODELS.insert(),
            [{"name": "m", "description": "", "metadata": {}, "labels": [], "notes": "",
              "archived": False, "workspace_id": 1, "creation_time": NOW,
              "last_updated_time": NOW}],
        )  # fmt: skip
        conn.execute(
            SESSIONS.insert(),
            [{"user_id": 3, "token_hash": "h" * 64, "expiry": NOW, "created_at": NOW,
              "token_type": "USER_SESSION"}],
        )  # fmt: skip
        conn.execute(
            NTSC.insert(),
            [{"task_id": "cmd-1", "allocation_id": "cmd-1.1", "kind": "COMMAND", "owner_id": 3,
              "description": "old command", "state": "TERMINATED", "ready": False, "argv": ["true"],
              "env": {}, "config": {}, "extra": {}, "resource_pool": "default", "slots": 0,
              "priority": 42, "proxied": False, "start_time": NOW, "end_time": NOW}],
        )  # fmt: skip
        if db.engine.dialect.name == "postgresql":
            for table in ("users", "experiments", "runs"):
                conn.exec_driver_sql(
                    f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                    f"(SELECT MAX(id) FROM {table}))"
                )


def _counts(db: Database) -> dict[str, Any]:
    with db.engine.connect() as conn:
        return {
            table: conn.exec_driver_sql(f"SELECT COUNT(*) FROM {table}").scalar()
            for table in ("users", "experiments", "runs", "metrics", "checkpoints_v2", "models",
                          "user_sessions", "ntsc_tasks")
        }  # fmt: skip


def test_a_0005_database_upgrades_in_place(db_url: str, make_master: Any) -> None:
    db = Database(db_url)
    upgrade_to(db, "0005")
    _fill_release_0005(db)
    before = _counts(db)
    db.migrate()
    assert _counts(db) == before, "the upgrade lost or added rows"
    with db.engine.connect() as conn:
        version = conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar()
        workspaces = conn.exec_driver_sql("SELECT id, name, immutable FROM workspaces").all()
        projects = conn.exec_driver_sql("SELECT id, name, workspace_id, immutable FROM projects")
        projects = projects.all()
        exp_projects = conn.exec_driver_sql("SELECT DISTINCT project_id FROM experiments").all()
        model_ws = conn.exec_driver_sql("SELECT DISTINCT workspace_id FROM models").all()
        task_ws = conn.exec_driver_sql("SELECT DISTINCT workspace_id FROM ntsc_tasks").all()
        descriptions = conn.exec_driver_sql("SELECT description FROM user_sessions").all()
    db.close()
    assert version >= "0006"  # later migrations (0007 metric tiles) run too
    assert [tuple(w) for w in workspaces] == [(1, "Uncategorized", True)]
    assert [tuple(p) for p in projects] == [(1, "Uncategorized", 1, True)]
    assert [tuple(r) for r in exp_projects] == [(1,)]
    assert [tuple(r) for r in model_ws] == [(1,)]
    assert [tuple(r) for r in task_ws] == [(1,)]
    assert [tuple(r) for r in descriptions] == [("",)]

    master = make_master(db_url)
    session: Session = master.session("admin")
    listed = session.request("GET", "/api/v1/experiments", params={"limit": 10})["experiments"]
    assert sorted(e["id"] for e in listed) == [1, 2, 3]
    assert {e["projectId"] for e in listed} == {1}
    trials = session.request("GET", "/api/v1/experiments/3/trials")["trials"]
    assert [t["id"] for t in trials] == [3]
    api = Client(session)
    workspace = api.workspaces.get(1)["workspace"]
    assert (workspace["name"], workspace["numProjects"], workspace["numExperiments"]) == (
        "Uncategorized",
        1,
        3,
    )
    (project,) = api.workspaces.projects(1)["projects"]
    assert (project["id"], project["name"], project["numExperiments"]) == (1, "Uncategorized", 3)
    made = api.workspaces.create("after-upgrade")["workspace"]
    assert made["id"] == 2
    master.stop()


def test_an_older_sqlite_database_keeps_its_trials(tmp_path: Any) -> None:
    """Migration 0004 rebuilds ``experiments`` on SQLite (batch mode); with foreign keys on, the
    rebuild's DROP used to cascade into ``runs``. Migrations now run with them off."""
    db = Database(f"sqlite:///{tmp_path / 'old.sqlite'}")
    upgrade_to(db, "0003")
    with db.engine.begin() as conn:
        conn.execute(USERS.insert(), [{"id": 1, "username": "u", "password_hash": "",
                                       "admin": False, "active": True, "remote": False,
                                       "modified_at": NOW}])  # fmt: skip
        experiment = {k: v for k, v in _experiment_row(1).items() if k != "unmanaged"}
        conn.execute(EXPERIMENTS.insert(), [experiment])
        conn.execute(RUNS.insert(), [_run_row(1)])
    db.migrate()
    with db.engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT COUNT(*) FROM runs").scalar() == 1
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
    db.close()
