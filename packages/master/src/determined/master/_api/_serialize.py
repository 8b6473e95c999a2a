"""Rows to protojson-shaped dicts (lowerCamelCase keys, ``STATE_*`` enums, RFC 3339 times)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from determined.master._core._projects import project_names
from determined.master._core._trial_tasks import trials_task_ids
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
    return trials(session, [row])[0]


def trials(session: Session, rows: Sequence[Run]) -> list[dict[str, Any]]:
    """Many trials in a fixed number of queries (a trial list used to cost five per trial)."""
    if not rows:
        return []
    ids = [row.id for row in rows]
    metric_ids = {
        i for row in rows for i in (row.latest_validation_id, row.best_validation_id) if i
    }
    workloads = (
        {m.id: m for m in session.scalars(select(Metric).where(Metric.id.in_(metric_ids)))}
        if metric_ids
        else {}
    )
    totals = _checkpoint_totals(session, Checkpoint.trial_id, ids)
    newest = (
        select(
            Checkpoint.id,
            func.row_number()
            .over(partition_by=Checkpoint.trial_id, order_by=Checkpoint.steps_completed.desc())
            .label("n"),
        )
        .where(Checkpoint.trial_id.in_(ids), Checkpoint.state == "COMPLETED")
        .subquery()
    )
    best_ckpts = {
        c.trial_id: c
        for c in session.scalars(
            select(Checkpoint).join(newest, newest.c.id == Checkpoint.id).where(newest.c.n == 1)
        )
    }
    tasks = trials_task_ids(session, ids)
    return [
        _trial(
            row,
            workloads.get(row.latest_validation_id or 0),
            workloads.get(row.best_validation_id or 0),
            totals.get(row.id, (0, 0)),
            best_ckpts.get(row.id),
            tasks.get(row.id) or [row.task_id],
        )
        for row in rows
    ]


def _trial(
    row: Run,
    latest: Metric | None,
    best: Metric | None,
    checkpoint_totals: tuple[int, int],
    best_ckpt: Checkpoint | None,
    task_ids: list[str],
) -> dict[str, Any]:
    ckpt_count, ckpt_size = checkpoint_totals
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
        "taskIds": task_ids,
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
    return experiments(session, [row], full=full)[0]


def experiments(
    session: Session, rows: Sequence[Experiment], *, full: bool = False
) -> list[dict[str, Any]]:
    """Many experiments in a fixed number of queries (a listing used to cost four per row)."""
    if not rows:
        return []
    ids = [row.id for row in rows]
    trial_ids: dict[int, list[int]] = {}
    for exp_id, run_id in session.execute(
        select(Run.experiment_id, Run.id).where(Run.experiment_id.in_(ids)).order_by(Run.id)
    ):
        trial_ids.setdefault(exp_id, []).append(run_id)
    best = _best_trials(session, rows)
    active = [row.id for row in rows if row.state == "ACTIVE" and not row.unmanaged]
    allocation_states: dict[int, set[str]] = {}
    if active:
        for exp_id, alloc_state in session.execute(
            select(Run.experiment_id, Allocation.state)
            .join(Run, Run.id == Allocation.trial_id)
            .where(Run.experiment_id.in_(active), Allocation.state.in_(("ASSIGNED", "RUNNING")))
            .distinct()
        ):
            allocation_states.setdefault(exp_id, set()).add(alloc_state)
    totals = _checkpoint_totals(session, Checkpoint.experiment_id, ids)
    return [
        _experiment(
            session,
            row,
            full=full,
            trial_ids=trial_ids.get(row.id, []),
            best=best.get(row.id, (None, None)),
            allocation_states=allocation_states.get(row.id, set()),
            checkpoint_totals=totals.get(row.id, (0, 0)),
        )
        for row in rows
    ]


def _experiment(
    session: Session,
    row: Experiment,
    *,
    full: bool,
    trial_ids: list[int],
    best: tuple[int | None, float | None],
    allocation_states: set[str],
    checkpoint_totals: tuple[int, int],
) -> dict[str, Any]:
    owner = session.get(User, row.owner_id)  # the session's identity map serves repeats
    searcher_cfg = row.config.get("searcher") or {}
    best_id, best_metric = best
    ckpt_count, ckpt_size = checkpoint_totals
    out = {
        "id": row.id,
        "name": row.config.get("name") or "",
        "description": row.config.get("description") or "",
        "labels": list(row.labels or []),
        "startTime": ts(row.start_time),
        "endTime": ts(row.end_time),
        "state": (
            _active_state(row, allocation_states) if row.state == "ACTIVE" else state(row.state)
        ),
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
        "checkpointSize": str(int(ckpt_size or 0)),
        "checkpointCount": int(ckpt_count or 0),
    }
    # Upstream's client bindings require both fields on every experiment object.
    out["config"] = row.config
    out["originalConfig"] = row.original_config if full else ""
    return out


STORED_CHECKPOINT_STATES = ("COMPLETED", "PARTIALLY_DELETED")
"""The checkpoints whose files count in sizes and counts (upstream's: all but DELETED ones)."""


def _checkpoint_totals(session: Session, key: Any, ids: list[int]) -> dict[int, tuple[int, int]]:
    """Count and total size of the stored checkpoints grouped by ``key`` (a trial or experiment
    id column of Checkpoint), for the rows whose key is in ``ids``."""
    query = (
        select(key, func.count(Checkpoint.id), func.coalesce(func.sum(Checkpoint.size), 0))
        .where(key.in_(ids), Checkpoint.state.in_(STORED_CHECKPOINT_STATES))
        .group_by(key)
    )
    return {int(owner): (int(count), int(size)) for owner, count, size in session.execute(query)}


def _active_state(row: Experiment, allocation_states: set[str]) -> str:
    """An ACTIVE experiment as upstream reports it: ``STATE_RUNNING`` once one of its trials' processes
    runs, ``STATE_STARTING`` while one is being launched, ``STATE_QUEUED`` otherwise (upstream's
    enrichment of ACTIVE by its allocations, ``allocation_states``: the ASSIGNED/RUNNING states of
    its trials' allocations). Unmanaged experiments have no allocations: ACTIVE."""
    if row.unmanaged:
        return "STATE_ACTIVE"
    if "RUNNING" in allocation_states:
        return "STATE_RUNNING"
    return "STATE_STARTING" if allocation_states else "STATE_QUEUED"


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


def _best_trials(
    session: Session, rows: Sequence[Experiment]
) -> dict[int, tuple[int, float | None]]:
    """Each experiment's trial with the best searcher metric so far and that value (experiments
    without a reported value are left out). Ties go to the lowest trial id.

    At most three statements whatever the number of experiments and trials: the best trial of each
    experiment, in its direction, is found through ``ix_runs_experiment_metric`` (a correlated
    ``LIMIT 1``), not by ranking every trial of it, which a 10,000-trial search paid on every read."""
    smaller_ids = []
    larger_ids = []
    for row in rows:
        smaller = bool((row.config.get("searcher") or {}).get("smaller_is_better", True))
        (smaller_ids if smaller else larger_ids).append(row.id)
    value = Run.searcher_metric_value
    best_ids: list[int] = []
    for ids, order in ((smaller_ids, value.asc()), (larger_ids, value.desc())):
        if not ids:
            continue
        best = (
            select(Run.id)
            .where(Run.experiment_id == Experiment.id, value.is_not(None))
            .order_by(order, Run.id)
            .limit(1)
            .correlate(Experiment)
            .scalar_subquery()
        )
        best_ids += [
            run_id
            for run_id in session.scalars(select(best).where(Experiment.id.in_(ids)))
            if run_id is not None
        ]
    if not best_ids:
        return {}
    return {
        exp_id: (int(run_id), clean_float(metric))
        for run_id, exp_id, metric in session.execute(
            select(Run.id, Run.experiment_id, value).where(Run.id.in_(best_ids))
        )
    }


def job_summary(row: Experiment) -> dict[str, Any]:
    return {"state": "STATE_SCHEDULED" if row.state == "ACTIVE" else "STATE_QUEUED", "jobsAhead": 0}
