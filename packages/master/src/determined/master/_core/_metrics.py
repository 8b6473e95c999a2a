"""Metric ingestion: stale-run checks, rollback archival and per-trial summary metrics."""

from __future__ import annotations

import datetime
import math
from typing import Any

import orjson
from sqlalchemy import insert, update
from sqlalchemy.orm import Session

from determined.master import _wire
from determined.master.db import Metric, Run, utcnow


def _summarize(summary: dict[str, Any], reports: list[dict[str, Any]]) -> dict[str, Any]:
    """``summary`` (per metric: type, count, last, and for numbers sum/min/max/mean) updated with
    every report of ``reports``, in order. Each entry is copied once per call, not once per report."""
    out = dict(summary)
    copied: set[str] = set()
    for values in reports:
        for name, raw in values.items():
            value = _wire.to_float(raw)
            if name not in copied:
                out[name] = dict(out.get(name) or {})
                copied.add(name)
            entry = out[name]
            if value is None:
                count = int(entry.get("count", 0)) + 1
                entry.clear()
                entry.update(
                    type="string" if isinstance(raw, str) else "object", last=raw, count=count
                )
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
    return out


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


def _insert_rows(session: Session, rows: list[dict[str, Any]]) -> None:
    """One multi-row INSERT of metric rows.

    On SQLite the DBAPI's executemany is called directly, with the storage formats SQLAlchemy's
    types use (JSON text, naive UTC ``YYYY-MM-DD HH:MM:SS.ffffff``): SQLAlchemy's per-row parameter
    processing costs more than the insert itself. Other databases go through SQLAlchemy Core.
    """
    connection = session.connection()
    if connection.dialect.name != "sqlite":
        session.execute(insert(Metric.__table__), rows)  # type: ignore[arg-type]
        return
    utc = datetime.timezone.utc
    params = [
        (
            row["trial_id"],
            row["trial_run_id"],
            row["metric_group"],
            row["total_batches"],
            row["end_time"].astimezone(utc).strftime("%Y-%m-%d %H:%M:%S.%f"),
            orjson.dumps(row["metrics"]).decode(),
            0,
        )
        for row in rows
    ]
    connection.exec_driver_sql(
        "INSERT INTO metrics (trial_id, trial_run_id, metric_group, total_batches, end_time, "
        "metrics, archived) VALUES (?, ?, ?, ?, ?, ?, ?)",
        params,
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
        batch: list[Any],
        report_time: Any,
    ) -> None:
        self.group = group
        self.trial_run_id = trial_run_id
        self.steps = steps
        self.avg = avg
        self.batch = batch
        self.report_time = report_time


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
            raise _wire.bad_request(
                f"invalid run id, {reported} (reported) != {current} (expected)"
            )


def ingest_many(
    session: Session,
    run: Run,
    reports: list[MetricReport],
    searcher_metric: str | None,
    smaller_is_better: bool,
    *,
    groups_seen: frozenset[str] | set[str] = frozenset(),
) -> list[Metric | None]:
    """Store reports of ``run`` in the open transaction and update its summaries once.

    ``groups_seen``: groups of which this process already stored a report of this run. For every
    other group, the first report archives what older runs reported in that group from its step on:
    the trial rolled back to a checkpoint, so those reports are superseded. The archival is
    idempotent, so an empty ``groups_seen`` (e.g. after a master restart) is safe, only slower.

    Validation reports are inserted one by one (the trial keeps their ids as latest/best validation);
    every other group is inserted with one multi-row INSERT. Returns, per report, the ORM row of a
    validation report and ``None`` for the others.
    """
    if not reports:
        return []
    if run.run_id > 1:
        first_steps: dict[str, int] = {}
        for report in reports:
            if report.group not in groups_seen:
                first_steps.setdefault(report.group, report.steps)
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
    summary = dict(run.summary_metrics or {})
    by_group: dict[str, list[dict[str, Any]]] = {}
    for report in reports:
        by_group.setdefault(report.group, []).append(report.avg)
    for group, values in by_group.items():
        summary[group] = _summarize(summary.get(group) or {}, values)
    bulk: list[dict[str, Any]] = []
    rows: list[Metric | None] = []
    for report in reports:
        avg = _finite_or_clean(report.avg)
        stored = {
            "avg_metrics": avg,
            "batch_metrics": _finite_or_clean(report.batch) if report.batch else [],
        }
        if report.group != "validation":
            bulk.append(
                {
                    "trial_id": run.id,
                    "trial_run_id": report.trial_run_id,
                    "metric_group": report.group,
                    "total_batches": report.steps,
                    "end_time": report.report_time,
                    "metrics": stored,
                    "archived": False,
                }
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
    if bulk:
        _insert_rows(session, bulk)
    run.summary_metrics = summary
    run.total_batches = max(run.total_batches or 0, *(r.steps for r in reports))
    run.last_activity = utcnow()
    return rows
