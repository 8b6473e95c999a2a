"""Rows to protojson-shaped dicts (lowerCamelCase keys, ``STATE_*`` enums, RFC 3339 times)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from determined.master._core._projects import project_names
from determined.master._core._trial_tasks import trial_task_ids
from determined.master._wire import clean_float, state, ts
from determined.master.db import (
    Allocation,
    Checkpoint,
    Experiment,
    Metric,
    Run,
    User,
    utcnow,
    validation_at_step,
)


def user(row: User) -> dict[str, Any]:
    return {
        "id": row.id,
        "username": row.username,
        "displayName": row.display_name or "",
        "admin": row.admin,
        "active": row.active,
        "remote": row.remote,
        "modifiedAt": ts(row.modified_at),
        "lastAuthAt": ts(row.last_auth_at),
        "agentUserGroup": dict(row.agent_user_group) if row.agent_user_group else None,
    }


def metrics_workload(row: Metric | None) -> dict[str, Any] | None:
    if row is None:
        return None
    return {
        "endTime": ts(row.end_time),
        "state": "STATE_COMPLETED",
        "metrics": {
            "avgMetrics": clean_float(row.metrics.get("avg_metrics") or {}),
            "batchMetrics": clean_float(row.metrics.get("batch_metrics") or []),
        },
        "numInputs": 0,
        "totalBatches": row.total_batches,
    }


def checkpoint(session: Session, row: Checkpoint, *, with_training: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {
        "uuid": row.uuid,
        "taskId": row.task_id,
        "allocationId": row.allocation_id,
        "reportTime": ts(row.report_time),
        "resources": {k: str(v) for k, v in (row.resources or {}).items()},
        "metadata": row.metadata_ or {},
        "state": state(row.state),
        "storageId": row.storage_id,
    }
    if with_training:
        training: dict[str, Any] = {"trialId": row.trial_id, "experimentId": row.experiment_id}
        run = session.get(Run, row.trial_id) if row.trial_id is not None else None
        if run is not None:
            exp = session.get(Experiment, run.experiment_id)
            training["hparams"] = run.hparams
            training["experimentConfig"] = exp.config if exp else None
            metric_name = ((exp.config if exp else {}).get("searcher") or {}).get("metric")
            val = validation_at_step(session, run.id, row.steps_completed)
            # Upstream's client requires ``avgMetrics`` in every metrics object it is sent.
            training["validationMetrics"] = {
                "avgMetrics": clean_float(val.metrics.get("avg_metrics") or {}) if val else {}
            }
            training["trainingMetrics"] = {"avgMetrics": {}}
            training["searcherMetric"] = (
                clean_float((val.metrics.get("avg_metrics") or {}).get(metric_name))
                if val and metric_name
                else None
            )
        out["training"] = training
    return out


def trial(session: Session, row: Run) -> dict[str, Any]:
    latest = session.get(Metric, row.latest_validation_id) if row.latest_validation_id else None
    best = session.get(Metric, row.best_validation_id) if row.best_validation_id else None
    ckpt_count, ckpt_size = session.execute(
        select(func.count(Checkpoint.id), func.coalesce(func.sum(Checkpoint.size), 0)).where(
            Checkpoint.trial_id == row.id, Checkpoint.state.in_(STORED_CHECKPOINT_STATES)
        )
    ).one()
    best_ckpt = session.scalar(
        select(Checkpoint)
        .where(Checkpoint.trial_id == row.id, Checkpoint.state == "COMPLETED")
        .order_by(Checkpoint.steps_completed.desc())
        .limit(1)
    )
    end = row.end_time
    start = row.start_time
    wall = (end - start).total_seconds() if end and start else 0.0
    return {
        "id": row.id,
        "experimentId": row.experiment_id,
        "requestId": row.request_id,
        "startTime": ts(row.start_time),
        "endTime": ts(row.end_time),
        "state": state(row.state),
        "restarts": row.restarts,
        "hparams": row.hparams,
        "totalBatchesProcessed": row.total_batches,
        "bestValidation": metrics_workload(best),
        "latestValidation": metrics_workload(latest),
        "bestCheckpoint": (
            {
                "uuid": best_ckpt.uuid,
                "totalBatches": best_ckpt.steps_completed,
                "state": state(best_ckpt.state),
                "endTime": ts(best_ckpt.report_time),
                "resources": {k: str(v) for k, v in (best_ckpt.resources or {}).items()},
            }
            if best_ckpt
            else None
        ),
        "runnerState": row.runner_state or "",
        "wallClockTime": wall,
        "searcherMetricValue": clean_float(row.searcher_metric_value),
        "taskId": row.task_id,
        "taskIds": trial_task_ids(session, row.id) or [row.task_id],
        "summaryMetrics": _summary(row.summary_metrics or {}),
        "totalCheckpointSize": str(int(ckpt_size or 0)),
        "checkpointCount": int(ckpt_count or 0),
        "metadata": row.metadata_ or {},
        "seed": row.seed,
        "trialRunId": row.run_id,
        "warmStartCheckpointUuid": row.warm_start_checkpoint_uuid,
        "progress": row.progress,
        "logRetentionDays": None,
        "logPolicyMatched": row.log_policy_matched,
    }


def _summary(summary: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for group, metrics in summary.items():
        key = {"training": "avg_metrics", "validation": "validation_metrics"}.get(group, group)
        out[key] = {
            name: {k: clean_float(v) for k, v in entry.items()} for name, entry in metrics.items()
        }
    return out


def experiment(session: Session, row: Experiment, *, full: bool = False) -> dict[str, Any]:
    owner = session.get(User, row.owner_id)
    trial_ids = list(
        session.scalars(select(Run.id).where(Run.experiment_id == row.id).order_by(Run.id))
    )
    searcher_cfg = row.config.get("searcher") or {}
    best_id, best_metric = _best_trial(session, row.id, searcher_cfg)
    out = {
        "id": row.id,
        "name": row.config.get("name") or "",
        "description": row.config.get("description") or "",
        "labels": list(row.labels or []),
        "startTime": ts(row.start_time),
        "endTime": ts(row.end_time),
        "state": _active_detail(session, row) if row.state == "ACTIVE" else state(row.state),
        "archived": row.archived,
        "numTrials": len(trial_ids),
        "trialIds": trial_ids,
        "displayName": (owner.display_name or "") if owner else "",
        "userId": row.owner_id,
        "username": owner.username if owner else "",
        "resourcePool": (row.config.get("resources") or {}).get("resource_pool") or "default",
        "searcherType": searcher_cfg.get("name") or "",
        "searcherMetric": searcher_cfg.get("metric") or "",
        "bestTrialId": best_id,
        "bestTrialSearcherMetric": best_metric,
        "notes": row.notes or "",
        "jobId": row.job_id,
        "forkedFrom": row.parent_id,
        "progress": row.progress,
        "projectId": row.project_id,
        **project_names(session, row.project_id),
        "unmanaged": bool(row.unmanaged),
        "externalExperimentId": row.external_experiment_id,
        "error": row.error,
        **_checkpoint_totals(session, row.id),
    }
    # Upstream's client bindings require both fields on every experiment object.
    out["config"] = row.config
    out["originalConfig"] = row.original_config if full else ""
    return out


STORED_CHECKPOINT_STATES = ("COMPLETED", "PARTIALLY_DELETED")
"""The checkpoints whose files count in sizes and counts (upstream's: all but DELETED ones)."""


def _checkpoint_totals(session: Session, experiment_id: int) -> dict[str, Any]:
    """Upstream's ``checkpointSize`` (int64 as a string) and ``checkpointCount`` of an experiment."""
    count, size = session.execute(
        select(func.count(Checkpoint.id), func.coalesce(func.sum(Checkpoint.size), 0)).where(
            Checkpoint.experiment_id == experiment_id,
            Checkpoint.state.in_(STORED_CHECKPOINT_STATES),
        )
    ).one()
    return {"checkpointSize": str(int(size or 0)), "checkpointCount": int(count or 0)}


def _active_detail(session: Session, row: Experiment) -> str:
    """An ACTIVE experiment as upstream reports it: ``STATE_RUNNING`` once one of its trials' processes
    runs, ``STATE_STARTING`` while one is being launched, ``STATE_QUEUED`` otherwise (upstream's
    enrichment of ACTIVE by its allocations). Unmanaged experiments have no allocations: ACTIVE."""
    if row.unmanaged:
        return "STATE_ACTIVE"
    states = set(
        session.scalars(
            select(Allocation.state)
            .join(Run, Run.id == Allocation.trial_id)
            .where(Run.experiment_id == row.id, Allocation.state.in_(("ASSIGNED", "RUNNING")))
        )
    )
    if "RUNNING" in states:
        return "STATE_RUNNING"
    return "STATE_STARTING" if states else "STATE_QUEUED"


def validated_experiment(config: dict[str, Any], project_id: int) -> dict[str, Any]:
    """The ``experiment`` of a ``validateOnly`` create: nothing was created, so, as upstream, an
    experiment with zero values (id 0, ``STATE_UNSPECIFIED``) carrying the validated config."""
    return {
        "id": 0,
        "name": str(config.get("name") or ""),
        "state": "STATE_UNSPECIFIED",
        "archived": False,
        "numTrials": 0,
        "jobId": "",
        "startTime": ts(utcnow()),
        "searcherType": str((config.get("searcher") or {}).get("name") or ""),
        "projectId": project_id,
        "projectOwnerId": 0,
        "username": "",
        "config": config,
        "originalConfig": "",
    }


def _best_trial(
    session: Session, experiment_id: int, searcher_cfg: dict[str, Any]
) -> tuple[int | None, float | None]:
    """The trial with the best searcher metric so far and that value (``None``s before any)."""
    value = Run.searcher_metric_value
    smaller = bool(searcher_cfg.get("smaller_is_better", True))
    best = session.execute(
        select(Run.id, value)
        .where(Run.experiment_id == experiment_id, value.is_not(None))
        .order_by(value.asc() if smaller else value.desc(), Run.id)
        .limit(1)
    ).first()
    if best is None:
        return None, None
    return int(best[0]), clean_float(best[1])


def job_summary(row: Experiment) -> dict[str, Any]:
    return {"state": "STATE_SCHEDULED" if row.state == "ACTIVE" else "STATE_QUEUED", "jobsAhead": 0}
