"""An experiment's trials as its page shows them: a page of the table, the best few for the chart,
the count and best value from the database.

A 10,000-trial search made the experiment page load every trial (its table, the live refresh every
two seconds and the learning curves each read and rendered all of them: seconds per request and
megabytes of HTML). Here each of those reads only what it shows.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from determined.master.db import Experiment, Run
from determined.master.ui._queries import TrialRow, searcher_of, trial_rows, warm_start_parents

TRIALS_PER_PAGE = 100
"""Rows of the experiment page's trials table."""
CHART_TRIALS = 100
"""Trials the experiment's learning curves show at most: the best by the searcher metric."""


@dataclasses.dataclass(frozen=True)
class TrialStats:
    """What the page says about all of an experiment's trials."""

    count: int
    best: float | None
    """The best searcher metric value any trial reached."""


def trial_stats(session: Session, exp: Experiment) -> TrialStats:
    """The count and the best value, in one aggregate query."""
    _, smaller = searcher_of(exp.config)
    value = Run.searcher_metric_value
    count, low, high = session.execute(
        select(func.count(Run.id), func.min(value), func.max(value)).where(
            Run.experiment_id == exp.id
        )
    ).one()
    return TrialStats(int(count or 0), low if smaller else high)


def pages(count: int) -> int:
    """How many table pages ``count`` trials fill (at least one, an empty one)."""
    return max(1, -(-count // TRIALS_PER_PAGE))


def page_rows(session: Session, exp: Experiment, page: int) -> list[TrialRow]:
    """Table rows of page ``page`` (1-based) of the experiment's trials, in id order."""
    runs = session.scalars(
        select(Run)
        .where(Run.experiment_id == exp.id)
        .order_by(Run.id)
        .offset((max(page, 1) - 1) * TRIALS_PER_PAGE)
        .limit(TRIALS_PER_PAGE)
    )
    return trial_rows(session, list(runs), {exp.id: searcher_of(exp.config)[0]})


def best_rows(session: Session, exp: Experiment, limit: int = CHART_TRIALS) -> list[TrialRow]:
    """The ``limit`` trials with the best searcher metric (then those without one, oldest first),
    in id order; every trial when there are no more than ``limit``."""
    metric, smaller = searcher_of(exp.config)
    value = Run.searcher_metric_value
    of_exp = select(Run).where(Run.experiment_id == exp.id)
    runs = list(
        session.scalars(
            of_exp.where(value.is_not(None))
            .order_by(value.asc() if smaller else value.desc(), Run.id)
            .limit(limit)
        )
    )
    if len(runs) < limit:
        runs += session.scalars(
            of_exp.where(value.is_(None)).order_by(Run.id).limit(limit - len(runs))
        )
    runs.sort(key=lambda run: run.id)
    return trial_rows(session, runs, {exp.id: metric})


def hparam_points(session: Session, exp: Experiment) -> list[dict[str, Any]]:
    """Every trial's id, state, hyperparameters, best value and parent (the hyperparameter view):
    one query over the runs' own columns, none of the table's per-trial extras."""
    rows = session.execute(
        select(
            Run.id,
            Run.state,
            Run.hparams,
            Run.searcher_metric_value,
            Run.warm_start_checkpoint_uuid,
        )
        .where(Run.experiment_id == exp.id)
        .order_by(Run.id)
    ).all()
    parents = warm_start_parents(session, [row.warm_start_checkpoint_uuid for row in rows])
    return [
        {
            "id": row.id,
            "state": row.state,
            "hparams": row.hparams or {},
            "best": row.searcher_metric_value,
            "parent": parents.get(row.warm_start_checkpoint_uuid or ""),
        }
        for row in rows
    ]
