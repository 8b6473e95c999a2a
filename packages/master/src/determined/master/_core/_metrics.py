"""Metric ingestion: stale-run checks, rollback archival and per-trial summary metrics."""

from __future__ import annotations

import math
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from determined.master import _wire
from determined.master.db import Metric, Run, utcnow


def check_group(group: str) -> str:
    if not isinstance(group, str) or not group:
        raise _wire.bad_request("group: must be a non-empty string")
    if "." in group:
        raise _wire.bad_request(f"group: {group!r} must not contain '.'")
    return group


def _summarize(summary: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    out = dict(summary)
    for name, raw in values.items():
        value = _wire.to_float(raw)
        entry = dict(out.get(name) or {})
        if value is None:
            entry = {"type": "string" if isinstance(raw, str) else "object", "last": raw}
            entry["count"] = int((out.get(name) or {}).get("count", 0)) + 1
            out[name] = entry
            continue
        count = int(entry.get("count", 0))
        if entry.get("type") != "number":
            entry = {"type": "number", "count": 0, "sum": 0.0}
            count = 0
        finite = not (math.isnan(value) or math.isinf(value))
        entry["last"] = _wire.clean_float(value)
        entry["count"] = count + 1
        if finite:
            entry["sum"] = float(entry.get("sum", 0.0)) + value
            entry["min"] = min(value, entry["min"]) if "min" in entry else value
            entry["max"] = max(value, entry["max"]) if "max" in entry else value
        entry["mean"] = entry["sum"] / entry["count"] if entry["count"] else None
        out[name] = entry
    return out


def ingest(
    session: Session,
    run: Run,
    group: str,
    body: dict[str, Any],
    searcher_metric: str | None,
    smaller_is_better: bool,
) -> Metric:
    """Store one report for ``run`` and update its summaries. Raises APIError on bad input."""
    trial_run_id = _wire.get(body, "trial_run_id")
    try:
        trial_run_id = int(trial_run_id) if trial_run_id is not None else run.run_id
    except (TypeError, ValueError):
        raise _wire.bad_request("metrics.trialRunId: must be an integer") from None
    if trial_run_id != run.run_id:
        raise _wire.bad_request(
            f"invalid run id, {trial_run_id} (reported) != {run.run_id} (expected)"
        )
    steps = _wire.get(body, "steps_completed", 0)
    try:
        steps = int(steps or 0)
    except (TypeError, ValueError):
        raise _wire.bad_request("metrics.stepsCompleted: must be an integer") from None
    inner = body.get("metrics") or {}
    if not isinstance(inner, dict):
        raise _wire.bad_request("metrics.metrics: must be an object")
    avg = _wire.get(inner, "avg_metrics")
    if avg is None:
        avg = {}
    if not isinstance(avg, dict):
        raise _wire.bad_request("metrics.metrics.avgMetrics: must be an object")
    for key in ("epoch", "epochs"):
        if key in avg and _wire.to_float(avg[key]) is None:
            raise _wire.bad_request(f"metrics.metrics.avgMetrics.{key}: must be a number")
    batch = _wire.get(inner, "batch_metrics") or []
    report_time = _wire.parse_ts(_wire.get(body, "report_time")) or utcnow()

    newest_run = session.scalar(
        select(Metric.trial_run_id)
        .where(Metric.trial_id == run.id, Metric.group == group)
        .order_by(Metric.trial_run_id.desc())
        .limit(1)
    )
    if newest_run is not None and newest_run < trial_run_id:
        # First report of a new run in this group: older runs' reports from this step on are
        # superseded (the trial rolled back to a checkpoint), so archive them.
        session.execute(
            update(Metric)
            .where(
                Metric.trial_id == run.id,
                Metric.group == group,
                Metric.trial_run_id < trial_run_id,
                Metric.total_batches >= steps,
                Metric.archived.is_(False),
            )
            .values(archived=True)
        )
    stored = {"avg_metrics": _wire.clean_float(avg), "batch_metrics": _wire.clean_float(batch)}
    if group == "validation":
        stored = {"validation_metrics": _wire.clean_float(avg), **stored}
    row = Metric(
        trial_id=run.id,
        trial_run_id=trial_run_id,
        group=group,
        total_batches=steps,
        end_time=report_time,
        metrics=stored,
    )
    session.add(row)
    session.flush()
    summary = dict(run.summary_metrics or {})
    summary[group] = _summarize(summary.get(group) or {}, avg)
    run.summary_metrics = summary
    run.total_batches = max(run.total_batches or 0, steps)
    run.last_activity = utcnow()
    if group == "validation":
        run.latest_validation_id = row.id
        value = _wire.to_float(avg.get(searcher_metric)) if searcher_metric else None
        if value is not None and not math.isnan(value):
            best = run.searcher_metric_value
            better = best is None or (value < best if smaller_is_better else value > best)
            if better:
                run.searcher_metric_value = value
                run.best_validation_id = row.id
    return row
