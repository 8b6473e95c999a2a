"""Trial routes: reads, and everything a running trial reports (metrics, progress, exits)."""

from __future__ import annotations

import functools
from typing import Any

from fastapi import Depends, Request
from fastapi.responses import Response
from sqlalchemy import select
from sqlalchemy.orm import Session

from determined.master._api import _serialize
from determined.master._api._access import P, on_run, on_trial, on_trial_async, require_trial
from determined.master._api._deps import (
    Principal,
    authenticate,
    experiments_of,
    int_param,
    json_body,
    master_of,
    metric_stream_cache_of,
    metrics_writer_of,
    trial_records_of,
)
from determined.master._api._json_route import api_router
from determined.master._api._metric_reports import batch_size, parse_batch, parse_reports
from determined.master._api._metric_stream import reply
from determined.master._api._plain_reports import prepare_batch
from determined.master._core._metric_requests import Deferred
from determined.master._wire import (
    TERMINAL_STATES,
    APIError,
    get,
    sub_object,
    to_float,
    ts,
)
from determined.master.db import Checkpoint, Experiment, Metric, Run, utcnow

router = api_router(tags=["Trials"])

EXITED_REASONS = (
    "INVALID_HP",
    "INIT_INVALID_HP",
    "USER_REQUESTED_STOP",
    "ERRORED",
    "USER_CANCELED",
)


def _get_run(session: Session, trial_id: int | None) -> Run:
    run = session.get(Run, trial_id) if trial_id is not None else None
    if run is None:
        raise APIError(404, f"trial {trial_id} not found")
    return run


def _run_and_exp(session: Session, trial_id: int) -> tuple[Run, Experiment]:
    run = _get_run(session, trial_id)
    exp = session.get(Experiment, run.experiment_id)
    if exp is None:
        raise APIError(404, f"experiment of trial {trial_id} not found")
    return run, exp


@router.get("/api/v1/trials/{trial_id}", dependencies=[on_trial(P.VIEW_EXPERIMENT_METADATA)])
def get_trial(
    request: Request, trial_id: int, p: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """One trial."""
    with master_of(request).db.read() as session:
        return {"trial": _serialize.trial(session, _get_run(session, trial_id))}


async def _report(request: Request, trial_id: int, group: Any, report: Any) -> dict[str, Any]:
    return await _report_many(request, trial_id, [(group, report)])


async def _report_many(
    request: Request, trial_id: int, reports: list[tuple[Any, Any]]
) -> dict[str, Any]:
    """Store reports (committed before we answer); validation metrics reach the searcher in order.

    ``async`` with no thread hop: the group-commit writer parses the reports on its thread just
    before their transaction (:class:`Deferred`: why) and resolves the request's future."""
    now = utcnow()  # a report without a time gets its request's arrival
    await metrics_writer_of(request).write_async(
        trial_id, Deferred(len(reports), lambda: parse_reports(reports, now))
    )
    return {}


@router.post(
    "/api/v1/trials/{trial_id}/metrics", dependencies=[on_trial_async(P.UPDATE_EXPERIMENT)]
)
async def report_metrics(
    request: Request,
    trial_id: int,
    body: dict[str, Any] = Depends(json_body),
    p: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """Store one metrics report: ``{group, metrics: {trialRunId, stepsCompleted, metrics}}``."""
    group = get(body, "group") or "training"
    return await _report(request, trial_id, group, get(body, "metrics"))


@router.post(
    "/api/v1/trials/{trial_id}/metrics/batch", dependencies=[on_trial_async(P.UPDATE_EXPERIMENT)]
)
async def report_metrics_batch(
    request: Request,
    trial_id: int,
    p: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """det's batch form: ``{reports: [{group, metrics}, ...]}`` stored in one transaction.

    The body waits for the metrics writer as it came (bytes), and is decoded and parsed by the
    writer just before its transaction (:class:`Deferred`: why)."""
    raw = await request.body()
    now = utcnow()
    await metrics_writer_of(request).write_async(
        trial_id,
        Deferred(
            batch_size(raw),
            lambda: parse_batch(raw, now),
            functools.partial(prepare_batch, raw, now),
        ),
    )
    return {}


@router.post(
    "/api/v1/trials/{trial_id}/training_metrics", dependencies=[on_trial_async(P.UPDATE_EXPERIMENT)]
)
async def report_training_metrics(
    request: Request,
    trial_id: int,
    body: dict[str, Any] = Depends(json_body),
    p: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """Legacy form of a training report: the body is the ``TrialMetrics`` itself (upstream's
    bindings) or wrapped in ``training_metrics``."""
    return await _report(request, trial_id, "training", sub_object(body, "training_metrics"))


@router.post(
    "/api/v1/trials/{trial_id}/validation_metrics",
    dependencies=[on_trial_async(P.UPDATE_EXPERIMENT)],
)
async def report_validation_metrics(
    request: Request,
    trial_id: int,
    body: dict[str, Any] = Depends(json_body),
    p: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """Legacy form of a validation report: the body is the ``TrialMetrics`` itself (upstream's
    bindings) or wrapped in ``validation_metrics``."""
    return await _report(request, trial_id, "validation", sub_object(body, "validation_metrics"))


@router.post("/api/v1/trials/{trial_id}/progress", dependencies=[on_trial(P.UPDATE_EXPERIMENT)])
def report_progress(
    request: Request,
    trial_id: int,
    body: dict[str, Any] = Depends(json_body),
    p: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """Record a trial's progress (``{progress, is_raw}``) and update the experiment's."""
    progress = to_float(body.get("progress"))
    if progress is None:
        raise APIError(400, "progress: must be a number")
    experiments_of(request).report_progress(trial_id, progress)
    return {}


@router.post(
    "/api/v1/trials/{trial_id}/runner/metadata", dependencies=[on_trial(P.UPDATE_EXPERIMENT)]
)
def runner_metadata(
    request: Request,
    trial_id: int,
    body: dict[str, Any] = Depends(json_body),
    p: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """Set the trial's status text (``{"state": "..."}``)."""
    meta = sub_object(body, "metadata")
    state = meta.get("state", "")
    if not isinstance(state, str):
        raise APIError(400, "state: must be a string")
    trial_records_of(request).set_runner_state(trial_id, state)
    return {}


@router.post("/api/v1/trials/{trial_id}/early_exit", dependencies=[on_trial(P.UPDATE_EXPERIMENT)])
def early_exit(
    request: Request,
    trial_id: int,
    body: dict[str, Any] = Depends(json_body),
    p: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """Record why user code ends the trial early (once); the searcher hears it at exit."""
    payload = sub_object(body, "early_exit")
    reason = str(payload.get("reason", "")).removeprefix("EXITED_REASON_")
    if reason not in EXITED_REASONS:
        raise APIError(
            400, f"reason: must be one of EXITED_REASON_{', EXITED_REASON_'.join(EXITED_REASONS)}"
        )
    trial_records_of(request).record_early_exit(trial_id, reason)
    return {}


@router.post("/api/v1/trials/{trial_id}/kill", dependencies=[on_trial(P.UPDATE_EXPERIMENT)])
def kill_trial(
    request: Request, trial_id: int, p: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """Kill one trial."""
    experiments_of(request).kill_trial(trial_id)
    return {}


@router.get(
    "/api/v1/trials/{trial_id}/checkpoints", dependencies=[on_trial(P.VIEW_EXPERIMENT_ARTIFACTS)]
)
def trial_checkpoints(
    request: Request, trial_id: int, p: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """The checkpoints of a trial."""
    from determined.master._api._checkpoints import list_checkpoints

    return list_checkpoints(
        request, Checkpoint.trial_id == trial_id, lambda s: _get_run(s, trial_id)
    )


WORKLOAD_FILTERS = {
    "": ("training", "validation", "checkpoint"),
    "FILTER_OPTION_UNSPECIFIED": ("training", "validation", "checkpoint"),
    "FILTER_OPTION_CHECKPOINT": ("checkpoint",),
    "FILTER_OPTION_VALIDATION": ("validation",),
    "FILTER_OPTION_CHECKPOINT_OR_VALIDATION": ("validation", "checkpoint"),
}


@router.get(
    "/api/v1/trials/{trial_id}/workloads", dependencies=[on_trial(P.VIEW_EXPERIMENT_METADATA)]
)
def trial_workloads(
    request: Request, trial_id: int, p: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """A trial's training, validation and checkpoint reports as upstream's workload containers,
    in step order (``filter``, ``orderBy``, ``offset``/``limit``, ``includeBatchMetrics``)."""
    from determined.master._wire import pagination, state

    q = request.query_params
    kinds = WORKLOAD_FILTERS.get(q.get("filter") or "")
    if kinds is None:
        raise APIError(400, f"filter: unknown option {q.get('filter')!r}")
    offset = int_param(q.get("offset"), "offset", 0) or 0
    limit = int_param(q.get("limit"), "limit", 0) or 0
    if offset < 0 or limit < 0:
        raise APIError(400, "offset and limit: must be >= 0")
    with_batches = q.get("includeBatchMetrics", "").lower() in ("1", "true")
    kind_order = {"training": 0, "validation": 1, "checkpoint": 2}
    items: list[tuple[int, int, int, dict[str, Any]]] = []
    with master_of(request).db.read() as session:
        _get_run(session, trial_id)
        groups = [k for k in ("training", "validation") if k in kinds]
        if groups:
            for row in session.scalars(
                select(Metric).where(
                    Metric.trial_id == trial_id,
                    Metric.group.in_(groups),
                    Metric.archived.is_(False),
                )
            ):
                workload = _serialize.metrics_workload(row) or {}
                if not with_batches:
                    workload["metrics"]["batchMetrics"] = []
                items.append(
                    (row.total_batches, kind_order[row.group], row.id, {row.group: workload})
                )
        if "checkpoint" in kinds:
            for ckpt in session.scalars(select(Checkpoint).where(Checkpoint.trial_id == trial_id)):
                workload = {
                    "uuid": ckpt.uuid,
                    "endTime": ts(ckpt.report_time),
                    "state": state(ckpt.state),
                    "resources": {k: str(v) for k, v in (ckpt.resources or {}).items()},
                    "totalBatches": ckpt.steps_completed,
                    "metadata": ckpt.metadata_ or {},
                }
                items.append((ckpt.steps_completed, 2, ckpt.id, {"checkpoint": workload}))
    items.sort(key=lambda item: item[:3], reverse=q.get("orderBy") == "ORDER_BY_DESC")
    total = len(items)
    page = items[offset : offset + limit] if limit else items[offset:]
    return {
        "workloads": [item[3] for item in page],
        "pagination": pagination(offset, limit, len(page), total),
    }


@router.post("/api/v1/runs/start")
def runs_start(
    request: Request,
    body: dict[str, Any] = Depends(json_body),
    p: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """Register the checkpoint storage a run uses; answers its ``storageId``."""
    run_id = int_param(get(body, "run_id"), "runId")
    if run_id is None:
        raise APIError(400, "runId: required")
    require_trial(request, p, run_id, P.UPDATE_EXPERIMENT)
    storage = get(body, "checkpoint_storage")
    storage_id = trial_records_of(request).register_storage(
        run_id, storage if isinstance(storage, dict) else None
    )
    return {"storageId": storage_id}


@router.get("/api/v1/runs/{run_id}/metadata", dependencies=[on_run(P.VIEW_EXPERIMENT_METADATA)])
def get_run_metadata(
    request: Request, run_id: int, p: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """A run's user metadata."""
    with master_of(request).db.read() as session:
        return {"metadata": _get_run(session, run_id).metadata_ or {}}


@router.post("/api/v1/runs/{run_id}/metadata", dependencies=[on_run(P.UPDATE_EXPERIMENT_METADATA)])
def post_run_metadata(
    request: Request,
    run_id: int,
    body: dict[str, Any] = Depends(json_body),
    p: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """Merge user metadata into a run's."""
    meta = body.get("metadata")
    if not isinstance(meta, dict):
        raise APIError(400, "metadata: must be an object")
    return {"metadata": trial_records_of(request).merge_metadata(run_id, meta)}


def _metrics_stream(request: Request, p: Principal, group: str | None) -> Response:
    q = request.query_params
    given = [int_param(t, "trialIds") for t in q.getlist("trialIds") + q.getlist("trial_ids")]
    ids = [trial_id for trial_id in given if trial_id is not None]
    if not ids or len(ids) != len(given):
        raise APIError(400, "trialIds: at least one trial id is required, and no empty one")
    group = group or q.get("group") or "training"
    if group.startswith("METRIC_TYPE_"):
        group = group[len("METRIC_TYPE_") :].lower()
    master = master_of(request)
    with master.db.read() as session:
        for trial_id in ids:
            run = _get_run(session, trial_id)
            require_trial(request, p, run.id, P.VIEW_EXPERIMENT_METADATA)
        lines = metric_stream_cache_of(request).lines(session, ids, group)
    return reply(lines)


@router.get("/api/v1/trials/metrics/trial_metrics")
def trial_metrics(request: Request, p: Principal = Depends(authenticate)) -> Response:
    """Stream the metrics of a group for some trials."""
    return _metrics_stream(request, p, None)


@router.get("/api/v1/trials/metrics/training_metrics")
def training_metrics(request: Request, p: Principal = Depends(authenticate)) -> Response:
    """Stream training metrics."""
    return _metrics_stream(request, p, "training")


@router.get("/api/v1/trials/metrics/validation_metrics")
def validation_metrics(request: Request, p: Principal = Depends(authenticate)) -> Response:
    """Stream validation metrics."""
    return _metrics_stream(request, p, "validation")


def trial_is_terminal(master: Any, trial_id: int) -> bool:
    with master.db.read() as session:
        run = session.get(Run, trial_id)
        return run is None or run.state in TERMINAL_STATES
