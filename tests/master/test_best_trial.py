"""An experiment's best trial (``bestTrialId``, ``bestTrialSearcherMetric``) on a real database.

No master: experiments and runs written straight into a migrated database (SQLite and PostgreSQL),
then the serializer's query read back for several experiments at once, in both directions, with
ties and with trials that reported nothing; on SQLite its plans must not sort a whole experiment's
trials (the index finds the best one).
"""

from __future__ import annotations

import sqlite3
from typing import Any

from sqlalchemy import event
from sqlalchemy.orm import Session

from determined.master._api._serialize import _best_trials
from determined.master.db import Database, Experiment, Run, User


def _experiment(session: Session, owner: int, smaller: bool | None) -> Experiment:
    searcher: dict[str, object] = {"metric": "loss"}
    if smaller is not None:
        searcher["smaller_is_better"] = smaller
    exp = Experiment(config={"searcher": searcher}, owner_id=owner)
    session.add(exp)
    session.flush()
    return exp


def _runs(session: Session, exp: Experiment, values: list[float | None]) -> list[int]:
    runs = [
        Run(
            experiment_id=exp.id,
            request_id=f"{exp.id}-{i}",
            task_id=f"{exp.id}.{i}",
            run_id=1,
            searcher_metric_value=value,
        )
        for i, value in enumerate(values)
    ]
    session.add_all(runs)
    session.flush()
    return [run.id for run in runs]


def test_best_trial_per_experiment_in_its_direction(db_url: str) -> None:
    db = Database(db_url)
    db.migrate()
    with db.write() as session:
        user = User(username="best-trial")
        session.add(user)
        session.flush()
        smaller = _experiment(session, user.id, None)  # smaller_is_better defaults to true
        larger = _experiment(session, user.id, False)
        ties = _experiment(session, user.id, True)
        nothing = _experiment(session, user.id, True)
        empty = _experiment(session, user.id, False)
        s = _runs(session, smaller, [0.5, None, 0.25, 0.75])
        g = _runs(session, larger, [0.5, 2.0, None, 1.0])
        t = _runs(session, ties, [0.3, 0.1, 0.1])
        _runs(session, nothing, [None, None])
        rows = [smaller, larger, ties, nothing, empty]

    statements: list[tuple[str, Any]] = []

    def record(_conn: Any, _cursor: Any, statement: str, params: Any, *_: Any) -> None:
        statements.append((statement, params))

    event.listen(db.engine, "before_cursor_execute", record)
    with db.read() as session:
        best = _best_trials(session, rows)
        alone = _best_trials(session, [larger])
    event.remove(db.engine, "before_cursor_execute", record)
    assert best == {smaller.id: (s[2], 0.25), larger.id: (g[1], 2.0), ties.id: (t[1], 0.1)}
    assert alone == {larger.id: (g[1], 2.0)}
    if db.is_sqlite:
        # Found through the index, not by sorting every trial of the experiment (which a read of
        # a 10,000-trial experiment used to do): no plan sorts whole (ties may be sorted).
        with sqlite3.connect(db_url.split("///", 1)[1]) as connection:
            for statement, params in statements:
                plan = connection.execute(f"EXPLAIN QUERY PLAN {statement}", params).fetchall()
                assert not any(row[-1] == "USE TEMP B-TREE FOR ORDER BY" for row in plan), plan
    db.close()
