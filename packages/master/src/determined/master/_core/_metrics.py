"""Metric ingestion: stale-run checks, rollback archival and per-trial summary metrics."""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import update
from sqlalchemy.orm import Session

from determined.master import _wire
from determined.master._core._prepared import Prepared, metric_columns
from determined.master.db import Metric, Run, utcnow
from determined.master.db._metric_inserts import MetricRow, insert_metric_rows

_NUMBER_TYPES = frozenset((float, int))


def _summarize(summary: dict[str, Any], reports: list[dict[str, Any]]) -> dict[str, Any]:
    """``summary`` (per metric: type, count, last, and for numbers sum/min/max/mean) updated with
    every report of ``reports``, in order. Each entry is copied once per call, not once per report;
    a metric whose values are all finite numbers is folded in with C-level ``sum``/``min``/``max``.
    """
    return _summarize_checked(summary, reports)[0]


def _summarize_checked(
    summary: dict[str, Any], reports: list[dict[str, Any]]
) -> tuple[dict[str, Any], bool]:
    """:func:`_summarize`, and whether every value of every report was a finite int or float (then
    the reports need no NaN/Infinity cleaning before they are stored)."""
    out = dict(summary)
    if not reports:
        return out, True
    plain = True
    for name, column in metric_columns(reports).items():
        entry = dict(out.get(name) or {})
        out[name] = entry
        if not _add_numbers(entry, column):
            _add_each(entry, column)
            plain = False
    return out, plain


def _add_numbers(entry: dict[str, Any], column: Sequence[Any]) -> bool:
    """Fold ``column`` into ``entry`` when every value is a finite int or float (an
    ``array('d')`` of a prepared request is); False (``entry`` untouched) otherwise."""
    if type(column) is not array and not set(map(type, column)) <= _NUMBER_TYPES:
        return False
    fresh = entry.get("type") != "number"
    total = sum(column, 0.0 if fresh else entry["sum"])
    if not math.isfinite(total):  # an inf/nan value (or an overflow): value by value
        return False
    if fresh:
        entry.clear()
        entry.update(type="number", count=0, sum=0.0)
    entry["count"] += len(column)
    entry["sum"] = total
    entry["last"] = float(column[-1])
    low, high = float(min(column)), float(max(column))
    if "min" not in entry or low < entry["min"]:
        entry["min"] = low
    if "max" not in entry or high > entry["max"]:
        entry["max"] = high
    entry["mean"] = total / entry["count"]
    return True


def _add_each(entry: dict[str, Any], column: Sequence[Any]) -> None:
    """Fold ``column`` into ``entry`` value by value (strings, objects, NaN/Infinity)."""
    for raw in column:
        value = _wire.to_float(raw)
        if value is None:
            count = int(entry.get("count", 0)) + 1
            entry.clear()
            entry.update(type="string" if isinstance(raw, str) else "object", last=raw, count=count)
            continue
        if entry.get("type") != "number":
            entry.clear()
            entry.update(type="number", count=0, sum=0.0)
        entry["count"] += 1
        if math.isfinite(value):
            entry["last"] = value
            entry["sum"] += value
            if "min" not in entry or value < entry["min"]:
                entry["min"] = value
            if "max" not in entry or value > entry["max"]:
                entry["max"] = value
        else:
            entry["last"] = _wire.clean_float(value)
        entry["mean"] = entry["sum"] / entry["count"]


def _finite_or_clean(values: Any) -> Any:
    """``values`` itself when it is a flat dict without NaN/Infinity (the usual case), else the
    protojson-safe copy ``_wire.clean_float`` makes."""
    if not isinstance(values, dict):
        return _wire.clean_float(values)
    for value in values.values():
        if type(value) is float:
            if not math.isfinite(value):
                return _wire.clean_float(values)
        elif isinstance(value, (dict, list)):
            return _wire.clean_float(values)
    return values


def _insert_rows(session: Session, rows: list[MetricRow]) -> None:
    """One bulk insert of metric rows in the session's transaction (see ``db._metric_inserts``)."""
    insert_metric_rows(session.connection(), rows)


def _archive_rolled_back(
    session: Session,
    run: Run,
    firsts: Iterable[tuple[str, int]],
    groups_seen: frozenset[str] | set[str],
) -> None:
    """After a restart (``run.run_id`` > 1): archive what older runs of ``run`` reported in each
    group, other than ``groups_seen``, from the step of its first ``(group, step)`` on."""
    if run.run_id <= 1:
        return
    first_steps: dict[str, int] = {}
    for group, steps in firsts:
        if group not in groups_seen:
            first_steps.setdefault(group, steps)
    for group, steps in first_steps.items():
        session.execute(
            update(Metric)
            .where(
                Metric.trial_id == run.id,
                Metric.group == group,
                Metric.trial_run_id < run.run_id,
                Metric.total_batches >= steps,
                Metric.archived.is_(False),
            )
            .values(archived=True)
        )


class MetricReport:
    """One metrics report, parsed and type-checked at the API edge; ready to store.

    ``trial_run_id`` is None when the client did not say which run reported (the current one).
    """

    __slots__ = ("avg", "batch", "group", "report_time", "steps", "trial_run_id")

    def __init__(
        self,
        group: str,
        trial_run_id: int | None,
        steps: int,
        avg: dict[str, Any],
        batch: Sequence[Any],
        report_time: Any,
    ) -> None:
        self.group = group
        self.trial_run_id = trial_run_id
        self.steps = steps
        self.avg = avg
        self.batch = batch
        self.report_time = report_time


def wrong_run(reported: int, current: int) -> _wire.APIError:
    """The 400 for reports of run ``reported`` when the trial's current run is ``current``."""
    return _wire.bad_request(f"invalid run id, {reported} (reported) != {current} (expected)")


def check_run(run: Run, reports: list[MetricReport]) -> None:
    """Refuse reports of a run older than ``run``'s current one (a stale process still reporting);
    reports that did not name their run get the current one.

    Raises:
        APIError: 400 naming both run ids.
    """
    current = run.run_id
    for report in reports:
        reported = report.trial_run_id
        if reported is None:
            report.trial_run_id = current
        elif reported != current:
            raise wrong_run(reported, current)


def ingest_many(
    session: Session,
    run: Run,
    reports: list[MetricReport],
    searcher_metric: str | None,
    smaller_is_better: bool,
    *,
    groups_seen: frozenset[str] | set[str] = frozenset(),
    rows_out: list[MetricRow | Prepared] | None = None,
) -> list[Metric | None]:
    """Store reports of ``run`` in the open transaction and update its summaries once.

    ``groups_seen``: groups of which this process already stored a report of this run. For every
    other group, the first report archives what older runs reported in that group from its step on:
    the trial rolled back to a checkpoint, so those reports are superseded. The archival is
    idempotent, so an empty ``groups_seen`` (e.g. after a master restart) is safe, only slower.

    Validation reports are inserted one by one (the trial keeps their ids as latest/best validation);
    every other group is inserted with one multi-row INSERT, or, with ``rows_out``, appended to it
    for the caller to insert (``db._metric_inserts.insert_metric_rows``) before its commit. Returns,
    per report, the ORM row of a validation report and ``None`` for the others.
    """
    if not reports:
        return []
    _archive_rolled_back(session, run, ((r.group, r.steps) for r in reports), groups_seen)
    summary = dict(run.summary_metrics or {})
    by_group: dict[str, list[dict[str, Any]]] = {}
    for report in reports:
        by_group.setdefault(report.group, []).append(report.avg)
    plain = True  # every averaged value a finite number: nothing to clean
    for group, values in by_group.items():
        summary[group], group_plain = _summarize_checked(summary.get(group) or {}, values)
        plain = plain and group_plain
    bulk: list[MetricRow] = []
    rows: list[Metric | None] = []
    trial_id = run.id
    for report in reports:
        avg = report.avg if plain else _finite_or_clean(report.avg)
        stored = {
            "avg_metrics": avg,
            "batch_metrics": _finite_or_clean(report.batch) if report.batch else [],
        }
        if report.group != "validation":
            bulk.append(
                (
                    trial_id,
                    report.trial_run_id,
                    report.group,
                    report.steps,
                    report.report_time,
                    stored,
                    False,
                )
            )
            rows.append(None)
            continue
        row = Metric(
            trial_id=run.id,
            trial_run_id=report.trial_run_id,
            group=report.group,
            total_batches=report.steps,
            end_time=report.report_time,
            metrics={"validation_metrics": avg, **stored},
        )
        session.add(row)
        session.flush()
        rows.append(row)
        run.latest_validation_id = row.id
        value = _wire.to_float(report.avg.get(searcher_metric)) if searcher_metric else None
        if value is not None and not math.isnan(value):
            best = run.searcher_metric_value
            better = best is None or (value < best if smaller_is_better else value > best)
            if better:
                run.searcher_metric_value = value
                run.best_validation_id = row.id
    if rows_out is not None:
        rows_out.extend(bulk)
    elif bulk:
        _insert_rows(session, bulk)
    run.summary_metrics = summary
    run.total_batches = max(run.total_batches or 0, *(r.steps for r in reports))
    run.last_activity = utcnow()
    return rows


def ingest_prepared(
    session: Session,
    run: Run,
    parts: list[Prepared],
    *,
    groups_seen: frozenset[str] | set[str] = frozenset(),
    rows_out: list[MetricRow | Prepared] | None = None,
) -> None:
    """:func:`ingest_many` for requests a helper prepared (``_prepared``: no validation reports,
    so nothing for the searcher): the rollback archival, the run's summaries folded from each
    metric's column, its batches and last activity, and the rows inserted as prepared (or, with
    ``rows_out``, appended to it)."""
    if not parts:
        return
    _archive_rolled_back(session, run, ((p.group, p.first_step) for p in parts), groups_seen)
    summary = dict(run.summary_metrics or {})
    for part in parts:
        metrics = dict(summary.get(part.group) or {})
        for name, column in part.columns.items():
            entry = dict(metrics.get(name) or {})
            metrics[name] = entry
            if not _add_numbers(entry, column):
                _add_each(entry, column)
        summary[part.group] = metrics
    if rows_out is not None:
        rows_out.extend(parts)
    else:
        insert_metric_rows(session.connection(), list(parts))
    run.summary_metrics = summary
    run.total_batches = max(run.total_batches or 0, *(part.max_step for part in parts))
    run.last_activity = utcnow()
