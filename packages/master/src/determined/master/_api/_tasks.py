"""Allocation signals (preemption long-poll, ready, rendezvous) and task logs."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import Depends, Request
from fastapi.responses import StreamingResponse
from sqlalchemy import or_, select
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from determined.master._api._access import (
    P,
    on_allocation,
    on_task,
    on_trial,
    require_experiment,
    require_log_tasks,
    require_trial,
)
from determined.master._api._deps import (
    Principal,
    allocations_of,
    authenticate,
    bool_param,
    int_param,
    json_any,
    json_body,
    master_of,
    trial_records_of,
)
from determined.master._api._json_route import api_router
from determined.master._wire import TERMINAL_STATES, APIError, get, parse_ts, ts
from determined.master.db import Allocation, Run, TaskLog, utcnow

router = api_router(tags=["Tasks"])

LEVELS = ("TRACE", "DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def _get_alloc(session: Session, allocation_id: str) -> Allocation:
    """The allocation row, or a 404 naming it."""
    row = session.get(Allocation, allocation_id)
    if row is None:
        raise APIError(404, f"allocation {allocation_id} not found")
    return row


def _alloc_or_404(request: Request, allocation_id: str) -> Allocation:
    with master_of(request).db.read() as session:
        row = _get_alloc(session, allocation_id)
        session.expunge(row)
        return row


@router.get(
    "/api/v1/allocations/{allocation_id}/signals/preemption",
    dependencies=[on_allocation()],
)
async def preemption_signal(
    request: Request, allocation_id: str, p: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """Long-poll: answers ``{"preempt": true}`` as soon as the allocation should stop, or
    ``false`` after ``timeout_seconds``."""
    q = request.query_params  # grpc-gateway takes the camelCase name too (upstream's bindings)
    raw = q.get("timeout_seconds", q.get("timeoutSeconds"))
    timeout = int_param(raw, "timeout_seconds", 60) or 0
    timeout = max(0, min(timeout, 3600))
    await run_in_threadpool(_alloc_or_404, request, allocation_id)
    preempt = await allocations_of(request).wait_preemption(allocation_id, float(timeout))
    return {"preempt": preempt}


@router.post(
    "/api/v1/allocations/{allocation_id}/signals/ack_preemption",
    dependencies=[on_allocation()],
)
def ack_preemption(
    request: Request, allocation_id: str, p: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """The trial saw the preemption signal and will exit: its exit is a pause, not completion."""
    allocations_of(request).ack_preemption(allocation_id)
    return {}


@router.post(
    "/api/v1/allocations/{allocation_id}/signals/pending_preemption",
    dependencies=[on_allocation()],
)
def pending_preemption(
    request: Request, allocation_id: str, p: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """The task asks to be preempted (nothing to do locally)."""
    _alloc_or_404(request, allocation_id)
    return {}


@router.post(
    "/api/v1/allocations/{allocation_id}/ready",
    dependencies=[on_allocation()],
)
def allocation_ready(
    request: Request, allocation_id: str, p: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """The task is up."""
    trial_records_of(request).mark_ready(allocation_id)
    return {}


@router.post(
    "/api/v1/allocations/{allocation_id}/waiting",
    dependencies=[on_allocation()],
)
def allocation_waiting(
    request: Request, allocation_id: str, p: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """The task waits on something (recorded nowhere yet)."""
    _alloc_or_404(request, allocation_id)
    return {}


@router.post(
    "/api/v1/allocations/{allocation_id}/notify_container_running",
    dependencies=[on_allocation()],
)
def notify_container_running(
    request: Request, allocation_id: str, p: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """Accepted for compatibility."""
    _alloc_or_404(request, allocation_id)
    return {"data": []}


@router.get(
    "/api/v1/allocations/{allocation_id}/resources/{resources_id}/rendezvous",
    dependencies=[on_allocation()],
)
def rendezvous(
    request: Request, allocation_id: str, resources_id: str, p: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """The addresses of the allocation's containers (one, on this machine)."""
    row = _alloc_or_404(request, allocation_id)
    return {"rendezvousInfo": {"addresses": ["127.0.0.1"], "rank": 0, "slots": [row.slots]}}


_gathers: dict[tuple[str, str], dict[str, Any]] = {}


@router.post(
    "/api/v1/allocations/{allocation_id}/all_gather",
    dependencies=[on_allocation()],
)
async def all_gather(
    request: Request,
    allocation_id: str,
    body: dict[str, Any] = Depends(json_body),
    p: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """Gather one value from each of ``numPeers`` callers sharing ``requestUuid``."""
    request_uuid = str(get(body, "request_uuid") or "")
    peers = int_param(get(body, "num_peers"), "numPeers", 1) or 1
    key = (allocation_id, request_uuid)
    entry = _gathers.setdefault(key, {"data": [], "event": asyncio.Event()})
    entry["data"].append(body.get("data"))
    if len(entry["data"]) >= peers:
        entry["event"].set()
    try:
        await asyncio.wait_for(entry["event"].wait(), 600)
    except asyncio.TimeoutError:
        raise APIError(
            400, f"all_gather {request_uuid}: timed out waiting for {peers} peers"
        ) from None
    data = list(entry["data"])
    entry.setdefault("served", 0)
    entry["served"] += 1
    if entry["served"] >= peers:
        _gathers.pop(key, None)
    return {"data": data}


def _store_logs(request: Request, entries: list[dict[str, Any]]) -> None:
    rows = []
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise APIError(400, f"logs[{index}]: must be an object")
        task_id = get(entry, "task_id")
        if not task_id:
            raise APIError(400, f"logs[{index}].taskId: required")
        rank = get(entry, "rank_id", entry.get("rank"))
        try:
            rank = int(rank) if rank not in (None, "") else None
        except (TypeError, ValueError):
            rank = None
        message = entry.get("log", entry.get("message", ""))
        if not isinstance(message, str):
            message = str(message)
        rows.append(
            TaskLog(
                task_id=str(task_id),
                allocation_id=get(entry, "allocation_id"),
                agent_id=get(entry, "agent_id"),
                container_id=get(entry, "container_id"),
                rank_id=rank,
                timestamp=parse_ts(entry.get("timestamp")) or utcnow(),
                level=entry.get("level"),
                log=message if message.endswith("\n") else message + "\n",
                source=entry.get("source"),
                stdtype=entry.get("stdtype"),
            )
        )
    trial_records_of(request).add_logs(rows)


@router.post("/api/v1/task/logs")
def post_task_logs(
    request: Request,
    body: dict[str, Any] = Depends(json_body),
    p: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """Store log lines shipped by a task (``{logs: [...]}``)."""
    logs = body.get("logs")
    if not isinstance(logs, list):
        raise APIError(400, "logs: must be a list")
    require_log_tasks(request, p, {str(get(e, "task_id")) for e in logs if isinstance(e, dict)})
    _store_logs(request, logs)
    return {}


@router.post("/task-logs")
def post_task_logs_legacy(
    request: Request, body: Any = Depends(json_any), p: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """Legacy log shipping: a bare JSON list of ``{task_id, timestamp, rank, log}``."""
    if not isinstance(body, list):
        raise APIError(400, "the body must be a JSON list of log entries")
    require_log_tasks(request, p, {str(get(e, "task_id")) for e in body if isinstance(e, dict)})
    _store_logs(request, body)
    return {}


def _log_filter(request: Request, task_ids: list[str]) -> Any:
    q = request.query_params
    stmt = select(TaskLog).where(TaskLog.task_id.in_(task_ids))
    ranks = [int_param(r, "rankIds") for r in q.getlist("rankIds")]
    if ranks:  # -1: lines without a rank (upstream's convention)
        has_rank = TaskLog.rank_id.in_(ranks)
        stmt = stmt.where(or_(has_rank, TaskLog.rank_id.is_(None)) if -1 in ranks else has_rank)
    levels = [
        lv if lv.startswith("LOG_LEVEL_") else f"LOG_LEVEL_{lv.upper()}"
        for lv in q.getlist("levels")
    ]
    if levels:
        stmt = stmt.where(TaskLog.level.in_(levels))
    stdtypes = q.getlist("stdtypes")
    if stdtypes:
        stmt = stmt.where(TaskLog.stdtype.in_(stdtypes))
    sources = q.getlist("sources")
    if sources:
        stmt = stmt.where(TaskLog.source.in_(sources))
    agents = q.getlist("agentIds")
    if agents:
        stmt = stmt.where(TaskLog.agent_id.in_(agents))
    allocations = q.getlist("allocationIds")
    if allocations:
        stmt = stmt.where(TaskLog.allocation_id.in_(allocations))
    containers = q.getlist("containerIds")
    if containers:
        stmt = stmt.where(TaskLog.container_id.in_(containers))
    before = parse_ts(q.get("timestampBefore"))
    if before is not None:
        stmt = stmt.where(TaskLog.timestamp < before)
    after = parse_ts(q.get("timestampAfter"))
    if after is not None:
        stmt = stmt.where(TaskLog.timestamp > after)
    text = q.get("searchText")
    if text:
        if bool_param(q.get("enableRegex")):
            try:
                re.compile(text)
            except re.error as e:
                raise APIError(400, f"searchText: invalid regular expression: {e}") from None
        else:
            stmt = stmt.where(TaskLog.log.contains(text, autoescape=True))
    return stmt


def _log_entry(row: TaskLog, trial_id: int | None) -> dict[str, Any]:
    out = {
        "id": str(row.id),
        "taskId": row.task_id,
        "allocationId": row.allocation_id,
        "timestamp": ts(row.timestamp),
        "message": row.log,
        "log": row.log,
        "level": row.level or "LOG_LEVEL_INFO",
        "agentId": row.agent_id,
        "containerId": row.container_id,
        "rankId": row.rank_id,
        "source": row.source,
        "stdtype": row.stdtype,
    }
    if trial_id is not None:
        out["trialId"] = trial_id
    return out


def _logs_response(
    request: Request, task_ids: list[str], trial_id: int | None, is_done: Any
) -> StreamingResponse:
    q = request.query_params
    limit = int_param(q.get("limit"), "limit", 0) or 0
    follow = bool_param(q.get("follow"))
    desc = q.get("orderBy") == "ORDER_BY_DESC"
    base = _log_filter(request, task_ids)
    regex = (
        re.compile(q["searchText"])
        if q.get("searchText") and bool_param(q.get("enableRegex"))
        else None
    )
    master = master_of(request)

    def fetch(after_id: int, count: int) -> list[TaskLog]:
        stmt = base.where(TaskLog.id > after_id)
        if desc and not follow:
            stmt = stmt.order_by(TaskLog.id.desc())
        else:
            stmt = stmt.order_by(TaskLog.id.asc())
        if count:
            stmt = stmt.limit(count)
        with master.db.read() as session:
            rows = list(session.scalars(stmt))
            for row in rows:
                session.expunge(row)
        if regex is not None:
            rows = [r for r in rows if regex.search(r.log)]
        return rows

    async def lines() -> AsyncIterator[bytes]:
        last = 0
        sent = 0
        while True:
            done_before = await run_in_threadpool(is_done) if follow else True
            want = (limit - sent) if limit else 1000
            rows = await run_in_threadpool(fetch, last, want)
            for row in rows:
                yield (json.dumps({"result": _log_entry(row, trial_id)}) + "\n").encode()
                last = max(last, row.id)
            sent += len(rows)
            if limit and sent >= limit:
                return
            if not follow:
                if rows and not limit and len(rows) == want and not desc:
                    continue
                return
            if not rows:
                if done_before:
                    return
                if await request.is_disconnected():
                    return
                await asyncio.sleep(0.1)

    return StreamingResponse(lines(), media_type="application/json")


def trial_log_source(master: Any, trial_id: int) -> tuple[str, Callable[[], bool]]:
    """A trial's task id and a check that it has ended (404 for an unknown trial): what a
    followed stream of the trial's logs (or log fields) needs."""
    with master.db.read() as session:
        run = session.get(Run, trial_id)
        if run is None:
            raise APIError(404, f"trial {trial_id} not found")
        task_id = run.task_id

    def done() -> bool:
        with master.db.read() as session:
            current = session.get(Run, trial_id)
            return current is None or current.state in TERMINAL_STATES

    return task_id, done


def task_log_done(master: Any, task_id: str) -> Callable[[], bool]:
    """A check that a task has ended (404 for an unknown task): a trial's task ends with the
    trial; a command, TensorBoard, notebook or shell when the task service says so."""
    from determined.master.db import Task

    with master.db.read() as session:
        task = session.get(Task, task_id)
        if task is None:
            raise APIError(404, f"task {task_id} not found")
        trial_id = task.trial_id
    tasks = master.manager.tasks

    def done() -> bool:
        if trial_id is None:
            return bool(tasks.is_done(task_id))
        with master.db.read() as session:
            current = session.get(Run, trial_id)
            return current is None or current.state in TERMINAL_STATES

    return done


@router.get("/api/v1/trials/{trial_id}/logs", dependencies=[on_trial(P.VIEW_EXPERIMENT_METADATA)])
def trial_logs(
    request: Request, trial_id: int, p: Principal = Depends(authenticate)
) -> StreamingResponse:
    """Stream a trial's logs, those of every task it had (``follow`` ends once the trial is
    terminal)."""
    from determined.master._core._trial_tasks import trial_task_ids

    master = master_of(request)
    task_id, done = trial_log_source(master, trial_id)
    with master.db.read() as session:
        task_ids = trial_task_ids(session, trial_id) or [task_id]
    return _logs_response(request, task_ids, trial_id, done)


@router.get("/api/v1/tasks/{task_id}/logs", dependencies=[on_task(P.VIEW_NSC)])
def task_logs(
    request: Request, task_id: str, p: Principal = Depends(authenticate)
) -> StreamingResponse:
    """Stream a task's logs."""
    return _logs_response(request, [task_id], None, task_log_done(master_of(request), task_id))


@router.post(
    "/api/v1/allocations/{allocation_id}/resources/{resources_id}/daemon",
    dependencies=[on_allocation()],
)
def mark_daemon(
    request: Request, allocation_id: str, resources_id: str, p: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """A non-chief launcher process: its exit alone does not end the allocation (one process
    per allocation locally, so nothing to record)."""
    _alloc_or_404(request, allocation_id)
    return {}


@router.post("/api/v1/webhooks/custom")
def custom_webhook(
    request: Request,
    body: dict[str, Any] = Depends(json_body),
    p: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """``core.alert()``: the alert goes to the trial's logs and to the CUSTOM triggers of the
    webhooks its experiment names (``integrations.webhooks``)."""
    raw = body.get("data")
    data: dict[str, Any] = raw if isinstance(raw, dict) else {}
    trial_id = int_param(get(body, "trial_id"), "trialId") or None
    exp_id = int_param(get(body, "experiment_id"), "experimentId") or None
    if trial_id is not None:
        require_trial(request, p, trial_id, P.UPDATE_EXPERIMENT)
        with master_of(request).db.read() as session:
            exp_id = session.scalar(select(Run.experiment_id).where(Run.id == trial_id))
    elif exp_id is not None:
        require_experiment(request, p, exp_id, P.UPDATE_EXPERIMENT)
    level = str(data.get("level") or "LOG_LEVEL_INFO")
    text = f"alert: {data.get('title', '')}: {data.get('description', '')}"
    if trial_id is not None:
        trial_records_of(request).alert(trial_id, text, level)
    if exp_id is not None:
        master_of(request).manager.webhooks.custom(exp_id, trial_id, data)
    return {}
