"""Cluster routes: the cluster-wide message, the tasks holding slots, the job queue, and resource
usage (agents and slots: ``_agents``).

Paths and JSON shapes are upstream's (``GetClusterMessage``/``SetClusterMessage``/
``DeleteClusterMessage``, ``GetTasks``, ``GetJobs``/``GetJobsV2``, ``ResourceAllocationRaw``/
``ResourceAllocationAggregated``, and the CSV reports under ``/resources/allocation/``).
"""

from __future__ import annotations

import csv
import datetime
import io
from typing import Any

from fastapi import Depends, Request
from fastapi.responses import Response

from determined.master._api._access import (
    P,
    mask_jobs,
    on_cluster,
    require_experiment,
    visible_task_ids,
)
from determined.master._api._deps import (
    Principal,
    authenticate,
    cluster_messages_of,
    cluster_view_of,
    experiments_of,
    int_param,
    json_body,
    require_admin,
    resource_usage_of,
    tasks_of,
)
from determined.master._api._json_route import api_router
from determined.master._core._cluster_messages import Notice
from determined.master._core._cluster_view import JOB_STATES, Job, TaskSummary
from determined.master._core._experiments import ExperimentPatch
from determined.master._core._usage import Period, Usage, parse_day
from determined.master._wire import APIError, get, pagination, parse_ts, ts

router = api_router(tags=["Cluster"])


# ---- cluster-wide message --------------------------------------------------------------------------


def notice_json(notice: Notice) -> dict[str, Any]:
    """Upstream's ``ClusterMessage``."""
    out = {
        "message": notice.message,
        "startTime": ts(notice.start_time),
        "createdTime": ts(notice.created_time),
    }
    if notice.end_time is not None:
        out["endTime"] = ts(notice.end_time)
    return out


@router.get("/api/v1/master/cluster_message")
def get_cluster_message(request: Request, p: Principal = Depends(authenticate)) -> dict[str, Any]:
    """The current message, also one that starts later (admins only, as upstream)."""
    require_admin(p)
    notice = cluster_messages_of(request).current()
    return {"clusterMessage": notice_json(notice)} if notice is not None else {}


@router.put("/api/v1/master/cluster_message")
def set_cluster_message(
    request: Request,
    body: dict[str, Any] = Depends(json_body),
    p: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """Replace the cluster message (``message``, ``startTime``, ``endTime`` or ``duration``)."""
    require_admin(p)
    message = body.get("message")
    if not isinstance(message, str) or not message:
        raise APIError(400, "message: required")
    duration = body.get("duration")
    if duration is not None and not isinstance(duration, str):
        raise APIError(400, "duration: must be a string like 24h, 5d or 2w")
    cluster_messages_of(request).set(
        message,
        p.user.id,
        start_time=parse_ts(get(body, "start_time")),
        end_time=parse_ts(get(body, "end_time")),
        duration=duration or None,
    )
    return {}


@router.delete("/api/v1/master/cluster_message")
def clear_cluster_message(request: Request, p: Principal = Depends(authenticate)) -> dict[str, Any]:
    """End the current cluster message."""
    require_admin(p)
    cluster_messages_of(request).clear()
    return {}


# ---- tasks (the agents and slots are ``_agents``'s) -------------------------------------------------


def _task_json(task: TaskSummary, agent_id: str) -> dict[str, Any]:
    return {
        "taskId": task.task_id,
        "allocationId": task.allocation_id,
        "name": task.name,
        "registeredTime": ts(task.registered_time),
        "resourcePool": task.resource_pool,
        "slotsNeeded": task.slots,
        "resources": [
            {
                "resourcesId": task.allocation_id,
                "containerId": task.allocation_id,
                "agentDevices": {agent_id: {"devices": [{"id": s} for s in task.slot_ids]}},
            }
        ],
        "schedulerType": "SCHEDULER_TYPE_PRIORITY",
        "priority": task.priority,
        "proxyPorts": [],
    }


@router.get("/api/v1/tasks")
def get_tasks(request: Request, p: Principal = Depends(authenticate)) -> dict[str, Any]:
    """The allocations holding slots, by allocation id (upstream's ``allocationIdToSummary``)."""
    view = cluster_view_of(request)
    agent_of = {a.resource_pool: a.agent_id for a in view.agents()}
    running = view.tasks()
    shown = visible_task_ids(request, p, {str(t.task_id) for t in running})
    summaries = {
        t.allocation_id: _task_json(t, agent_of.get(t.resource_pool, ""))
        for t in running
        if str(t.task_id) in shown
    }
    tasks = tasks_of(request)  # commands, notebooks, ...: their names and proxy ports
    for summary in summaries.values():
        live = tasks.live_task(str(summary["taskId"]))
        if live is not None:
            task = tasks.get(live.task_id)
            summary["name"] = task.description if task else summary["name"]
            if live.port is not None:
                summary["proxyPorts"] = [{"serviceId": live.task_id, "port": live.port}]
    return {"allocationIdToSummary": summaries}


_SNAKE_SUMMARY = {
    "taskId": "task_id",
    "allocationId": "allocation_id",
    "registeredTime": "registered_time",
    "resourcePool": "resource_pool",
    "slotsNeeded": "slots_needed",
    "schedulerType": "scheduler_type",
    "proxyPorts": "proxy_ports",
}


@router.get("/tasks")
def get_tasks_legacy(request: Request, p: Principal = Depends(authenticate)) -> dict[str, Any]:
    """Upstream's older ``GET /tasks`` (outside ``/api/v1``, still used by its e2e helpers): the same
    allocations as ``/api/v1/tasks``, as a bare map of allocation id to a snake_case summary."""
    summaries = get_tasks(request, p)["allocationIdToSummary"]
    return {
        aid: {_SNAKE_SUMMARY.get(k, k): v for k, v in summary.items()}
        for aid, summary in summaries.items()
    }


# ---- job queue -------------------------------------------------------------------------------------


def _job_json(job: Job) -> dict[str, Any]:
    return {
        "summary": {"state": job.state, "jobsAhead": job.jobs_ahead},
        "type": job.type,
        "submissionTime": ts(job.submission_time),
        "username": job.username,
        "userId": job.user_id,
        "resourcePool": job.resource_pool,
        "isPreemptible": job.type == "TYPE_EXPERIMENT",
        "priority": job.priority,
        "weight": job.weight,
        "entityId": job.entity_id,
        "jobId": job.job_id,
        "requestedSlots": job.requested_slots,
        "allocatedSlots": job.allocated_slots,
        "name": job.name or job.job_id,
        "progress": job.progress or 0.0,
        "workspaceId": 1,
    }


def _job_page(request: Request, p: Principal) -> tuple[list[dict[str, Any]], dict[str, int]]:
    q = request.query_params
    pool = q.get("resourcePool") or q.get("resource_pool") or None
    states = q.getlist("states")
    unknown = [s for s in states if s not in JOB_STATES and s != "STATE_UNSPECIFIED"]
    if unknown:
        raise APIError(400, f"states: unknown job states {unknown}; use {', '.join(JOB_STATES)}")
    jobs = [j for j in cluster_view_of(request).jobs(pool) if not states or j.state in states]
    jobs = mask_jobs(request, p, jobs)
    jobs.sort(key=lambda j: (j.jobs_ahead, j.job_id))
    if (q.get("orderBy") or q.get("order_by")) in ("ORDER_BY_DESC", "2"):
        jobs.reverse()
    offset = int_param(q.get("offset"), "offset", 0) or 0
    limit = int_param(q.get("limit"), "limit", 0) or 0
    page = jobs[offset : offset + limit] if limit > 0 else jobs[offset:]
    return [_job_json(j) for j in page], pagination(offset, limit, len(page), len(jobs))


@router.get("/api/v1/job-queues")
def get_jobs(request: Request, p: Principal = Depends(authenticate)) -> dict[str, Any]:
    """The jobs holding or waiting for slots, in queue order."""
    jobs, page = _job_page(request, p)
    return {"jobs": jobs, "pagination": page}


@router.get("/api/v1/job-queues-v2")
def get_jobs_v2(request: Request, p: Principal = Depends(authenticate)) -> dict[str, Any]:
    """The same as ``/api/v1/job-queues``, each job wrapped as ``{"full": job}``."""
    jobs, page = _job_page(request, p)
    return {"jobs": [{"full": j} for j in jobs], "pagination": page}


@router.post("/api/v1/job-queues")
def update_job_queue(
    request: Request,
    body: dict[str, Any] = Depends(json_body),
    p: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """Change jobs' priority or weight (``updates``: ``jobId`` with ``priority``, ``weight`` or
    ``resourcePool``), as ``PATCH /api/v1/experiments/{id}`` changes its resources."""
    updates = body.get("updates")
    if not isinstance(updates, list) or not updates:
        raise APIError(400, "updates: must be a non-empty list")
    changes = []
    for index, update in enumerate(updates):
        where = f"updates[{index}]"
        if not isinstance(update, dict) or not get(update, "job_id"):
            raise APIError(400, f"{where}.jobId: required")
        priority = int_param(get(update, "priority"), f"{where}.priority")
        if priority is not None and not 1 <= priority <= 99:
            raise APIError(400, f"{where}.priority: must be between 1 and 99")
        weight = get(update, "weight")
        if weight is not None and (not isinstance(weight, (int, float)) or weight <= 0):
            raise APIError(400, f"{where}.weight: must be a positive number")
        pool = get(update, "resource_pool")
        if pool not in (None, "", "default"):
            raise APIError(400, f"{where}.resourcePool: there is only the pool 'default'")
        if priority is None and weight is None and not pool:
            raise APIError(400, f"{where}: give a priority, a weight or a resource pool")
        exp_id = cluster_view_of(request).experiment_of_job(str(get(update, "job_id")))
        require_experiment(request, p, exp_id, P.UPDATE_EXPERIMENT)
        patch = ExperimentPatch(
            priority=priority,
            weight=float(weight) if weight is not None else None,
            resources_given=True,
        )
        changes.append((exp_id, patch))
    for exp_id, patch in changes:
        experiments_of(request).patch(exp_id, patch)
    return {}


# ---- resource usage --------------------------------------------------------------------------------

_CSV = "text/csv"


def _range(request: Request) -> tuple[datetime.datetime, datetime.datetime]:
    q = request.query_params
    start = parse_ts(q.get("timestamp_after") or q.get("timestampAfter"))
    end = parse_ts(q.get("timestamp_before") or q.get("timestampBefore"))
    if start is None or end is None:
        raise APIError(400, "timestamp_after and timestamp_before: required (RFC 3339)")
    return start, end


def _days(request: Request) -> tuple[datetime.date, datetime.date, bool]:
    q = request.query_params
    period = q.get("period") or "RESOURCE_ALLOCATION_AGGREGATION_PERIOD_DAILY"
    if period not in (
        "RESOURCE_ALLOCATION_AGGREGATION_PERIOD_DAILY",
        "RESOURCE_ALLOCATION_AGGREGATION_PERIOD_MONTHLY",
    ):
        raise APIError(400, f"period: unknown aggregation period {period!r}")
    monthly = period.endswith("MONTHLY")
    first = parse_day(
        q.get("start_date") or q.get("startDate") or "", "start_date", monthly=monthly
    )
    last = parse_day(q.get("end_date") or q.get("endDate") or "", "end_date", monthly=monthly)
    return first, last, monthly


def _raw_entry(usage: Usage) -> dict[str, Any]:
    return {
        "kind": "experiment" if usage.experiment_id is not None else usage.task_type.lower(),
        "startTime": ts(usage.start_time),
        "endTime": ts(usage.end_time),
        "experimentId": usage.experiment_id or 0,
        "username": usage.username,
        "userId": usage.user_id or 0,
        "labels": usage.labels,
        "seconds": usage.seconds,
        "slots": usage.slots,
        # det's additions, so a client can render the allocations CSV from this JSON route
        "allocationId": usage.allocation_id,
        "taskType": usage.task_type,
        "resourcePool": usage.resource_pool,
    }


def _period_entry(period: Period) -> dict[str, Any]:
    return {
        "periodStart": period.start.strftime("%Y-%m" if period.monthly else "%Y-%m-%d"),
        "period": "RESOURCE_ALLOCATION_AGGREGATION_PERIOD_"
        + ("MONTHLY" if period.monthly else "DAILY"),
        "seconds": period.seconds,
        "byUsername": period.by_username,
        "byExperimentLabel": period.by_experiment_label,
        "byResourcePool": period.by_resource_pool,
        "byAgentLabel": {},
    }


def _csv(header: list[str], rows: list[list[Any]]) -> Response:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return Response(out.getvalue(), media_type=_CSV)


def _seconds(value: float) -> str:
    return f"{value:f}"


@router.get("/api/v1/resources/allocation/raw", dependencies=[on_cluster(P.VIEW_CLUSTER_USAGE)])
def allocation_raw(request: Request, p: Principal = Depends(authenticate)) -> dict[str, Any]:
    """Each allocation's slot time within ``[timestamp_after, timestamp_before]``."""
    usages = resource_usage_of(request).allocations(*_range(request))
    return {"resourceEntries": [_raw_entry(u) for u in usages]}


@router.get(
    "/api/v1/resources/allocation/aggregated", dependencies=[on_cluster(P.VIEW_CLUSTER_USAGE)]
)
def allocation_aggregated(request: Request, p: Principal = Depends(authenticate)) -> dict[str, Any]:
    """Slot-seconds per day or month, by user, experiment label and resource pool."""
    first, last, monthly = _days(request)
    periods = resource_usage_of(request).aggregated(first, last, monthly=monthly)
    return {"resourceEntries": [_period_entry(x) for x in periods]}


@router.get("/resources/allocation/raw", dependencies=[on_cluster(P.VIEW_CLUSTER_USAGE)])
def allocation_raw_csv(request: Request, p: Principal = Depends(authenticate)) -> Response:
    """:func:`allocation_raw` as CSV (upstream's columns)."""
    usages = resource_usage_of(request).allocations(*_range(request))
    header = ["experiment_id", "kind", "username", "labels", "slots", "start_time", "end_time"]
    rows = [
        [
            e["experimentId"],
            e["kind"],
            e["username"],
            ",".join(x.replace("\\", "\\\\").replace(",", "\\,") for x in e["labels"]),
            e["slots"],
            e["startTime"] or "",
            e["endTime"] or "",
            _seconds(e["seconds"]),
        ]
        for e in map(_raw_entry, usages)
    ]
    return _csv([*header, "seconds"], rows)


@router.get(
    "/resources/allocation/allocations-csv", dependencies=[on_cluster(P.VIEW_CLUSTER_USAGE)]
)
def allocations_csv(request: Request, p: Principal = Depends(authenticate)) -> Response:
    """One CSV row per allocation: who, which experiment, slots, times and slot hours."""
    usages = resource_usage_of(request).allocations(*_range(request))
    header = [
        "allocation_id",
        "task_type",
        "username",
        "workspace_name",
        "experiment_id",
        "slots",
        "start_time",
        "end_time",
        "imagepulling_time",
        "slot_hours",
        "resource_pool",
    ]
    rows = [
        [
            u.allocation_id,
            u.task_type,
            u.username,
            u.workspace_name,
            u.experiment_id or "",
            u.slots,
            ts(u.start_time) or "",
            ts(u.end_time) or "",
            "0.0",
            _seconds(u.slot_seconds / 3600.0),
            u.resource_pool,
        ]
        for u in usages
    ]
    return _csv(header, rows)


@router.get("/resources/allocation/aggregated", dependencies=[on_cluster(P.VIEW_CLUSTER_USAGE)])
def aggregated_csv(request: Request, p: Principal = Depends(authenticate)) -> Response:
    """:func:`allocation_aggregated` as CSV rows of (aggregation type, key, date, seconds)."""
    first, last, monthly = _days(request)
    rows: list[list[Any]] = []
    for period in resource_usage_of(request).aggregated(first, last, monthly=monthly):
        day = _period_entry(period)["periodStart"]
        for kind, values in (
            ("experiment_label", period.by_experiment_label),
            ("username", period.by_username),
            ("resource_pool", period.by_resource_pool),
            ("total", {"total": period.seconds}),
        ):
            rows.extend([kind, key, day, _seconds(seconds)] for key, seconds in values.items())
    return _csv(["aggregation_type", "aggregation_key", "date", "seconds"], rows)
