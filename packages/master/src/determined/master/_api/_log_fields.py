"""The values a trial's or task's logs can be filtered by (upstream's ``TrialLogsFields`` and
``TaskLogsFields``): a stream of ``{"result": {agentIds, containerIds, rankIds, stdtypes, sources}}``
lines; with ``follow`` it repeats when they change and ends once the trial or task has ended."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import Depends, Request
from fastapi.responses import StreamingResponse
from sqlalchemy import distinct, select
from starlette.concurrency import run_in_threadpool

from determined.master._api._access import P, on_task, on_trial
from determined.master._api._deps import Principal, authenticate, bool_param, master_of
from determined.master._api._json_route import api_router
from determined.master._api._tasks import task_log_done, trial_log_source
from determined.master.db import TaskLog

router = api_router(tags=["Tasks"])

_COLUMNS = {
    "allocationIds": TaskLog.allocation_id,
    "agentIds": TaskLog.agent_id,
    "containerIds": TaskLog.container_id,
    "rankIds": TaskLog.rank_id,
    "stdtypes": TaskLog.stdtype,
    "sources": TaskLog.source,
}


def _fields(request: Request, task_id: str, names: tuple[str, ...]) -> dict[str, list[Any]]:
    """Each field's distinct non-empty values among the task's logs, sorted."""
    out: dict[str, list[Any]] = {}
    with master_of(request).db.read() as session:
        for name in names:
            column = _COLUMNS[name]
            values = session.scalars(select(distinct(column)).where(TaskLog.task_id == task_id))
            out[name] = sorted(v for v in values if v is not None and v != "")
    return out


def _stream(
    request: Request, task_id: str, names: tuple[str, ...], is_done: Callable[[], bool]
) -> StreamingResponse:
    follow = bool_param(request.query_params.get("follow"))

    async def lines() -> AsyncIterator[bytes]:
        last: dict[str, list[Any]] | None = None
        while True:
            done = await run_in_threadpool(is_done) if follow else True
            fields = await run_in_threadpool(_fields, request, task_id, names)
            if fields != last:
                yield (json.dumps({"result": fields}) + "\n").encode()
                last = fields
            if done or await request.is_disconnected():
                return
            await asyncio.sleep(0.5)

    return StreamingResponse(lines(), media_type="application/json")


@router.get(
    "/api/v1/trials/{trial_id}/logs/fields",
    dependencies=[on_trial(P.VIEW_EXPERIMENT_METADATA)],
)
def trial_logs_fields(
    request: Request, trial_id: int, p: Principal = Depends(authenticate)
) -> StreamingResponse:
    """The values of a trial's log fields (``follow``: until the trial ends)."""
    task_id, done = trial_log_source(master_of(request), trial_id)
    names = ("agentIds", "containerIds", "rankIds", "stdtypes", "sources")
    return _stream(request, task_id, names, done)


@router.get("/api/v1/tasks/{task_id}/logs/fields", dependencies=[on_task(P.VIEW_NSC)])
def task_logs_fields(
    request: Request, task_id: str, p: Principal = Depends(authenticate)
) -> StreamingResponse:
    """The values of a task's log fields (``follow``: until the task ends)."""
    done = task_log_done(master_of(request), task_id)
    names = ("allocationIds", "agentIds", "containerIds", "rankIds", "stdtypes", "sources")
    return _stream(request, task_id, names, done)
