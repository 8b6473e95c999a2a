"""Trial source infos: a task reports the checkpoint or model version it used; the metrics of those
tasks are read back per checkpoint and per model version (upstream's ``ReportTrialSourceInfo``,
``GetTrialMetricsByCheckpoint`` and ``GetTrialMetricsByModelVersion``)."""

from __future__ import annotations

from typing import Any

from fastapi import Depends, Request

from determined.master._api._access import (
    P,
    on_checkpoint_uuid,
    on_model,
    require_checkpoint,
    require_trial,
    visible_trial_ids,
)
from determined.master._api._deps import (
    Principal,
    authenticate,
    int_param,
    json_body,
    trial_sources_of,
)
from determined.master._api._json_route import api_router
from determined.master._core._trial_sources import MetricRow, SourceInfo, source_type
from determined.master._wire import APIError, clean_float, get, ts

router = api_router(tags=["Internal"])


def _report(row: MetricRow) -> dict[str, Any]:
    """Upstream's ``trialv1.MetricsReport`` (``metrics`` holds the stored keys as they are)."""
    return {
        "id": row.id,
        "trialId": row.trial_id,
        "trialRunId": row.trial_run_id,
        "totalBatches": row.total_batches,
        "endTime": ts(row.end_time),
        "metrics": clean_float(row.metrics),
        "group": row.group,
        "archived": row.archived,
    }


def _filters(request: Request) -> tuple[str | None, str | None]:
    q = request.query_params
    raw_type = q.get("trialSourceInfoType") or q.get("trial_source_info_type")
    group = q.get("metricGroup") or q.get("metric_group") or None
    return (source_type(raw_type) if raw_type else None), group


@router.post("/api/v1/trial-source-info")
def report_trial_source_info(
    request: Request,
    body: dict[str, Any] = Depends(json_body),
    p: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """Record that a trial used a checkpoint (and the model version it came from, if any)."""
    info = get(body, "trial_source_info")
    if not isinstance(info, dict):
        raise APIError(400, "trialSourceInfo: required")
    trial_id = int_param(get(info, "trial_id"), "trialSourceInfo.trialId")
    uuid = get(info, "checkpoint_uuid")
    if trial_id is None:
        raise APIError(400, "trialSourceInfo.trialId: required")
    if not isinstance(uuid, str) or not uuid:
        raise APIError(400, "trialSourceInfo.checkpointUuid: required")
    require_trial(request, p, trial_id, P.UPDATE_EXPERIMENT)
    require_checkpoint(request, p, uuid, P.VIEW_EXPERIMENT_ARTIFACTS)
    recorded = trial_sources_of(request).record(
        SourceInfo(
            trial_id=trial_id,
            checkpoint_uuid=uuid,
            source_type=source_type(get(info, "trial_source_info_type")),
            model_id=int_param(get(info, "model_id"), "trialSourceInfo.modelId"),
            model_version=int_param(get(info, "model_version"), "trialSourceInfo.modelVersion"),
        )
    )
    return {"trialId": recorded.trial_id, "checkpointUuid": recorded.checkpoint_uuid}


@router.get(
    "/api/v1/checkpoints/{checkpoint_uuid}/metrics",
    dependencies=[on_checkpoint_uuid(P.VIEW_EXPERIMENT_ARTIFACTS)],
)
def checkpoint_metrics(
    request: Request, checkpoint_uuid: str, p: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """Every metrics report of the trials that used this checkpoint (all of them: upstream
    stopped at 1000 per trial)."""
    source, group = _filters(request)
    rows = trial_sources_of(request).checkpoint_metrics(checkpoint_uuid, source, group)
    shown = visible_trial_ids(request, p, {r.trial_id for r in rows})
    return {"metrics": [_report(r) for r in rows if r.trial_id in shown]}


@router.get(
    "/api/v1/models/{model_name}/versions/{model_version_num}/metrics",
    dependencies=[on_model(P.VIEW_MODEL_REGISTRY)],
)
def model_version_metrics(
    request: Request, model_name: str, model_version_num: str, p: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """Every metrics report of the trials that used this model version."""
    number = int_param(model_version_num, "modelVersionNum")
    assert number is not None
    source, group = _filters(request)
    rows = trial_sources_of(request).model_version_metrics(model_name, number, source, group)
    shown = visible_trial_ids(request, p, {r.trial_id for r in rows})
    return {"metrics": [_report(r) for r in rows if r.trial_id in shown]}
