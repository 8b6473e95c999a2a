"""Rows a database-level test or benchmark starts from: a user, one experiment and its runs.

Tests import it as ``db_rows`` (the root pytest config puts tests/ on the path; benchmarks put it
there themselves).
"""

from __future__ import annotations

from typing import Any

from determined.master.db import Database, Experiment, Run, User


def experiment_with_runs(
    db: Database, trials: int, *, username: str = "test", config: dict[str, Any] | None = None
) -> tuple[int, list[int]]:
    """A migrated ``db`` gets a user, an experiment (``config``: by default a searcher on
    ``loss``) and ``trials`` runs at run id 1; returns the experiment id and the run ids in order."""
    with db.write() as session:
        user = User(username=username)
        session.add(user)
        session.flush()
        exp = Experiment(config=config or {"searcher": {"metric": "loss"}}, owner_id=user.id)
        session.add(exp)
        session.flush()
        runs = [
            Run(experiment_id=exp.id, request_id=str(i), task_id=f"t{i}", run_id=1)
            for i in range(trials)
        ]
        session.add_all(runs)
        session.flush()
        return exp.id, [run.id for run in runs]
