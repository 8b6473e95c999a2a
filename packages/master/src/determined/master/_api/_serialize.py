"""Rows to protojson-shaped dicts (lowerCamelCase keys, ``STATE_*`` enums, RFC 3339 times)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import bindparam, func, select
from sqlalchemy.orm import Session

from determined.master._core._projects import projects_names
from determined.master._core._trial_tasks import trials_task_ids
from determined.master._wire import clean_float, state, ts
from determined.master.db import (
    Allocation,
    Checkpoint,
    Experiment,
    Metric,
    Run,
    User,
    core_rows,
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


def metrics_workload(row: Metric | Any) -> dict[str, Any] | None:
    """A validation as upstream's workload (``row``: a ``Metric`` or a row with its columns)."""
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
    """Many trials in a fixed number of queries (a trial list used to cost five per trial).

    The queries are built once (:data:`_TRIAL_QUERIES`) and run as Core statements: building an
    ORM statement and its cache key, then loading entities, was most of the master's CPU per
    trial read (``benchmarks/RESULTS.md``)."""
    if not rows:
        return []
    ids = [row.id for row in rows]
    q = _TRIAL_QUERIES
    metric_ids = list(
        {i for row in rows for i in (row.latest_validation_id, row.best_validation_id) if i}
    )
    workloads = (
        {m.id: m for m in core_rows(session, q.workloads, {"ids": metric_ids})}
        if metric_ids
        else {}
    )
    totals = _checkpoint_totals(session, q.checkpoint_totals, ids)
    best_ckpts = {c.trial_id: c for c in core_rows(session, q.newest_checkpoints, {"ids": ids})}
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
    latest: Any,
    best: Any,
    checkpoint_totals: tuple[int, int],
    best_ckpt: Any,
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
    """Many experiments in a fixed number of prebuilt queries (a listing used to cost four per
    row; see :func:`trials` for why Core)."""
    if not rows:
        return []
    q = _EXPERIMENT_QUERIES
    ids = [row.id for row in rows]
    trial_ids: dict[int, list[int]] = {}
    for exp_id, run_id in core_rows(session, q.trial_ids, {"ids": ids}):
        trial_ids.setdefault(exp_id, []).append(run_id)
    best = _best_trials(session, rows)
    active = [row.id for row in rows if row.state == "ACTIVE" and not row.unmanaged]
    allocation_states: dict[int, set[str]] = {}
    if active:
        for exp_id, alloc_state in core_rows(session, q.allocation_states, {"ids": active}):
            allocation_states.setdefault(exp_id, set()).add(alloc_state)
    totals = _checkpoint_totals(session, q.checkpoint_totals, ids)
    owners = {u.id: u for u in core_rows(session, q.owners, {"ids": [r.owner_id for r in rows]})}
    projects = projects_names(session, [row.project_id for row in rows])
    return [
        _experiment(
            row,
            full=full,
            owner=owners.get(row.owner_id),
            project=projects[row.project_id],
            trial_ids=trial_ids.get(row.id, []),
            best=best.get(row.id, (None, None)),
            allocation_states=allocation_states.get(row.id, set()),
            checkpoint_totals=totals.get(row.id, (0, 0)),
        )
        for row in rows
    ]


def _experiment(
    row: Experiment,
    *,
    full: bool,
    owner: Any,
    project: dict[str, Any],
    trial_ids: list[int],
    best: tuple[int | None, float | None],
    allocation_states: set[str],
    checkpoint_totals: tuple[int, int],
) -> dict[str, Any]:
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
        **project,
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


def _checkpoint_totals_query(key: Any) -> Any:
    """Count and total size of the stored checkpoints grouped by ``key`` (the trial or experiment
    id column of the checkpoints table), for the keys in ``:ids``."""
    c = Checkpoint.__table__.c
    return (
        select(key, func.count(c.id), func.coalesce(func.sum(c.size), 0))
        .where(key.in_(bindparam("ids", expanding=True)), c.state.in_(STORED_CHECKPOINT_STATES))
        .group_by(key)
    )


def _checkpoint_totals(session: Session, query: Any, ids: list[int]) -> dict[int, tuple[int, int]]:
    """``query`` (a :func:`_checkpoint_totals_query`) run for ``ids``: key -> (count, size)."""
    rows = core_rows(session, query, {"ids": ids})
    return {int(owner): (int(count), int(size)) for owner, count, size in rows}


class _TrialQueries:
    """The statements of :func:`trials`, built once; ``:ids`` expands to the trial (or metric) ids."""

    def __init__(self) -> None:
        ids: Any = bindparam("ids", expanding=True)
        m, c = Metric.__table__.c, Checkpoint.__table__.c
        self.workloads = select(m.id, m.end_time, m.metrics, m.total_batches).where(m.id.in_(ids))
        self.checkpoint_totals = _checkpoint_totals_query(c.trial_id)
        ranked = (
            select(
                c.id,
                func.row_number()
                .over(partition_by=c.trial_id, order_by=c.steps_completed.desc())
                .label("n"),
            )
            .where(c.trial_id.in_(ids), c.state == "COMPLETED")
            .subquery()
        )
        self.newest_checkpoints = (
            select(c.trial_id, c.uuid, c.steps_completed, c.state, c.report_time, c.resources)
            .join(ranked, ranked.c.id == c.id)
            .where(ranked.c.n == 1)
        )


_TRIAL_QUERIES = _TrialQueries()


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
    smaller_ids: list[int] = []
    larger_ids: list[int] = []
    for row in rows:
        smaller = bool((row.config.get("searcher") or {}).get("smaller_is_better", True))
        (smaller_ids if smaller else larger_ids).append(row.id)
    q = _EXPERIMENT_QUERIES
    best_ids: list[int] = []
    for ids, statement in ((smaller_ids, q.best_smallest), (larger_ids, q.best_largest)):
        if ids:
            best_ids += [r for (r,) in core_rows(session, statement, {"ids": ids}) if r is not None]
    if not best_ids:
        return {}
    return {
        exp_id: (int(run_id), clean_float(metric))
        for run_id, exp_id, metric in core_rows(session, q.best_values, {"ids": best_ids})
    }


class _ExperimentQueries:
    """The statements of :func:`experiments`, built once; ``:ids`` expands to the ids given."""

    def __init__(self) -> None:
        ids: Any = bindparam("ids", expanding=True)
        r, a, c = Run.__table__.c, Allocation.__table__.c, Checkpoint.__table__.c
        e, u = Experiment.__table__.c, User.__table__.c
        self.trial_ids = (
            select(r.experiment_id, r.id).where(r.experiment_id.in_(ids)).order_by(r.id)
        )
        self.allocation_states = (
            select(r.experiment_id, a.state)
            .join(Run.__table__, r.id == a.trial_id)
            .where(r.experiment_id.in_(ids), a.state.in_(("ASSIGNED", "RUNNING")))
            .distinct()
        )
        self.checkpoint_totals = _checkpoint_totals_query(c.experiment_id)
        self.owners = select(u.id, u.username, u.display_name).where(u.id.in_(ids))
        value = r.searcher_metric_value

        def best(order: Any) -> Any:
            top = (
                select(r.id)
                .where(r.experiment_id == e.id, value.is_not(None))
                .order_by(order, r.id)
                .limit(1)
                .correlate(Experiment.__table__)
                .scalar_subquery()
            )
            return select(top).where(e.id.in_(ids))

        self.best_smallest = best(value.asc())
        self.best_largest = best(value.desc())
        self.best_values = select(r.id, r.experiment_id, value).where(r.id.in_(ids))


_EXPERIMENT_QUERIES = _ExperimentQueries()


def job_summary(row: Experiment) -> dict[str, Any]:
    return {"state": "STATE_SCHEDULED" if row.state == "ACTIVE" else "STATE_QUEUED", "jobsAhead": 0}
