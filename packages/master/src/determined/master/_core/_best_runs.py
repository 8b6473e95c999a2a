"""Each experiment's best trial and the project-wide summary-metric ranges built on it.

Upstream's experiment table shows, per experiment, the summary metrics of its best trial (the one
with the best searcher metric; a ``single`` experiment's only trial even before it validated). The
project's metric columns (``validation.loss.min``, ...) and their numeric ranges (upstream's
``GetProjectNumericMetricsRange``) are read from those trials only: one small query picks them, and
only their summaries are loaded.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from determined.master.db import Experiment, Run

SUMMARY_STATISTICS = ("last", "max", "mean", "min")
"""The statistics of a numeric metric a project column (and range) exists for, upstream's order."""


def best_run_ids(session: Session, experiments: Iterable[Experiment]) -> dict[int, int]:
    """``{experiment id: best trial id}`` for the experiments that have one."""
    by_id = {exp.id: exp for exp in experiments}
    if not by_id:
        return {}
    best: dict[int, tuple[int, float | None]] = {}
    rows = session.execute(
        select(Run.experiment_id, Run.id, Run.searcher_metric_value)
        .where(Run.experiment_id.in_(list(by_id)))
        .order_by(Run.id)
    )
    for exp_id, run_id, value in rows:
        searcher = (by_id[exp_id].config or {}).get("searcher") or {}
        if value is None or math.isnan(value):
            if searcher.get("name") == "single" and exp_id not in best:
                best[exp_id] = (run_id, None)
            continue
        held = best.get(exp_id)
        smaller = searcher.get("smaller_is_better", True) is not False
        if held is None or held[1] is None or (value < held[1] if smaller else value > held[1]):
            best[exp_id] = (run_id, value)
    return {exp_id: run_id for exp_id, (run_id, _) in best.items()}


def best_summaries(session: Session, project_id: int) -> list[tuple[float | None, dict[str, Any]]]:
    """``(searcher metric value, summary metrics)`` of the best trial of each live experiment of
    the project."""
    experiments = session.scalars(
        select(Experiment).where(
            Experiment.project_id == project_id, Experiment.state.not_in(("DELETED", "DELETING"))
        )
    )
    ids = list(best_run_ids(session, experiments).values())
    out: list[tuple[float | None, dict[str, Any]]] = []
    for start in range(0, len(ids), 500):
        rows = session.execute(
            select(Run.searcher_metric_value, Run.summary_metrics).where(
                Run.id.in_(ids[start : start + 500])
            )
        )
        out.extend((value, summary or {}) for value, summary in rows)
    return out


def metric_ranges(session: Session, project_id: int) -> list[dict[str, Any]]:
    """Upstream's ``MetricsRange`` list: ``{metricsName, min, max}`` per
    ``<group>.<metric>.<statistic>`` of the numeric metrics of the project's best trials, and
    ``searcherMetricsVal`` over their searcher metric values."""
    values: dict[str, list[float]] = {}
    searcher: list[float] = []
    for value, summary in best_summaries(session, project_id):
        if value is not None and math.isfinite(value):
            searcher.append(value)
        for group, entries in summary.items():
            if not isinstance(entries, dict):
                continue
            for name, entry in entries.items():
                if not isinstance(entry, dict) or entry.get("type") != "number":
                    continue
                for stat in SUMMARY_STATISTICS:
                    number = entry.get(stat)
                    if isinstance(number, (int, float)) and math.isfinite(number):
                        values.setdefault(f"{group}.{name}.{stat}", []).append(float(number))
    ranges = [
        {"metricsName": name, "min": min(found), "max": max(found)}
        for name, found in sorted(values.items())
    ]
    if searcher:
        ranges.append(
            {"metricsName": "searcherMetricsVal", "min": min(searcher), "max": max(searcher)}
        )
    return ranges
