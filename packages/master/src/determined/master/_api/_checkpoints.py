"""Checkpoint routes: report, describe, metadata, delete, and listings."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Depends, Request
from sqlalchemy import select
from sqlalchemy.orm import Session

from determined.master._api import _serialize
from determined.master._api._deps import Principal, authenticate, int_param, json_body, master_of
from determined.master._wire import (
    APIError,
    get,
    pagination,
    parse_ts,
    sub_object,
    to_float,
    unstate,
)
from determined.master.db import Checkpoint, Experiment, Metric, Run, utcnow

router = APIRouter(tags=["Checkpoints"])

CHECKPOINT_STATES = ("ACTIVE", "COMPLETED", "ERROR", "DELETED", "PARTIALLY_DELETED")


def _sizes(resources: Any, where: str) -> dict[str, int]:
    if resources is None:
        return {}
    if not isinstance(resources, dict):
        raise APIError(400, f"{where}: must map paths to sizes")
    out: dict[str, int] = {}
    for path, size in resources.items():
        try:
            out[str(path)] = int(size)
        except (TypeError, ValueError):
            raise APIError(
                400, f"{where}[{path!r}]: size must be an integer (or its string)"
            ) from None
    return out


def _get_ckpt(session: Session, uuid: str) -> Checkpoint:
    ckpt = session.scalar(select(Checkpoint).where(Checkpoint.uuid == uuid))
    if ckpt is None:
        raise APIError(404, f"checkpoint {uuid} not found")
    return ckpt


@router.post("/api/v1/checkpoints")
def report_checkpoint(
    request: Request,
    body: dict[str, Any] = Depends(json_body),
    p: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """Record a checkpoint a trial finished uploading (``metadata.steps_completed`` required)."""
    ckpt = sub_object(body, "checkpoint")
    uuid = ckpt.get("uuid")
    if not isinstance(uuid, str) or not uuid:
        raise APIError(400, "checkpoint.uuid: required")
    metadata = ckpt.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise APIError(400, "checkpoint.metadata: must be an object")
    steps = metadata.get("steps_completed")
    if steps is None or to_float(steps) is None:
        raise APIError(400, "checkpoint.metadata.steps_completed: required (an integer)")
    resources = _sizes(ckpt.get("resources"), "checkpoint.resources")
    task_id = str(get(ckpt, "task_id") or "")
    allocation_id = get(ckpt, "allocation_id") or None
    state = unstate(str(ckpt.get("state") or "STATE_COMPLETED"))
    if state not in CHECKPOINT_STATES:
        raise APIError(400, f"checkpoint.state: unknown state {ckpt.get('state')!r}")
    with master_of(request).db.write() as session:
        run = session.scalar(select(Run).where(Run.task_id == task_id)) if task_id else None
        if run is None and p.allocation_id:
            from determined.master.db import Allocation

            alloc = session.get(Allocation, p.allocation_id)
            run = session.get(Run, alloc.trial_id) if alloc and alloc.trial_id else None
        values = {
            "task_id": task_id or (run.task_id if run else ""),
            "allocation_id": allocation_id,
            "report_time": parse_ts(get(ckpt, "report_time")) or utcnow(),
            "state": state,
            "resources": resources,
            "metadata_": metadata,
            "size": sum(resources.values()),
            "trial_id": run.id if run else None,
            "experiment_id": run.experiment_id if run else None,
            "storage_id": int_param(get(ckpt, "storage_id"), "storageId"),
            "steps_completed": int(float(steps)),
        }
        existing = session.scalar(select(Checkpoint).where(Checkpoint.uuid == uuid))
        if existing is None:
            session.add(Checkpoint(uuid=uuid, **values))
        else:
            # A retried report (clients retry it as idempotent) updates the same row.
            for key, value in values.items():
                setattr(existing, key, value)
    return {}


@router.patch("/api/v1/checkpoints")
def patch_checkpoints(
    request: Request,
    body: dict[str, Any] = Depends(json_body),
    p: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """Record the files that remain of checkpoints after a partial or full delete."""
    items = body.get("checkpoints")
    if not isinstance(items, list):
        raise APIError(400, "checkpoints: must be a list")
    with master_of(request).db.write() as session:
        for index, item in enumerate(items):
            if not isinstance(item, dict) or not item.get("uuid"):
                raise APIError(400, f"checkpoints[{index}].uuid: required")
            ckpt = _get_ckpt(session, item["uuid"])
            res = item.get("resources") or {}
            if isinstance(res, dict) and isinstance(res.get("resources"), dict):
                res = res["resources"]
            remaining = _sizes(res, f"checkpoints[{index}].resources")
            ckpt.resources = remaining
            ckpt.size = sum(remaining.values())
            ckpt.state = "PARTIALLY_DELETED" if remaining else "DELETED"
    return {}


@router.delete("/api/v1/checkpoints")
def delete_checkpoints(
    request: Request,
    body: dict[str, Any] = Depends(json_body),
    p: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """Delete checkpoints from their storage and mark them DELETED."""
    from determined.master._core._gc import delete_checkpoints as gc_delete

    uuids = get(body, "checkpoint_uuids")
    if not isinstance(uuids, list) or not all(isinstance(u, str) for u in uuids):
        raise APIError(400, "checkpointUuids: must be a list of uuids")
    master = master_of(request)
    with master.db.read() as session:
        for uuid in uuids:
            _get_ckpt(session, uuid)
    gc_delete(master.db, uuids)
    return {}


@router.get("/api/v1/checkpoints/{uuid}")
def get_checkpoint(
    request: Request, uuid: str, p: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """One checkpoint."""
    with master_of(request).db.read() as session:
        return {"checkpoint": _serialize.checkpoint(session, _get_ckpt(session, uuid))}


@router.post("/api/v1/checkpoints/{uuid}/metadata")
def post_checkpoint_metadata(
    request: Request,
    uuid: str,
    body: dict[str, Any] = Depends(json_body),
    p: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """Replace a checkpoint's user metadata."""
    ckpt_body = sub_object(body, "checkpoint")
    metadata = ckpt_body.get("metadata")
    if not isinstance(metadata, dict):
        raise APIError(400, "checkpoint.metadata: must be an object")
    with master_of(request).db.write() as session:
        ckpt = _get_ckpt(session, uuid)
        ckpt.metadata_ = metadata
        session.flush()
        return {"checkpoint": _serialize.checkpoint(session, ckpt)}


def list_checkpoints(
    request: Request, condition: Any, check: Callable[[Any], Any], searcher_of: Any = None
) -> dict[str, Any]:
    """Shared listing with sortByAttr/sortByMetric/orderBy/offset/limit/states."""
    q = request.query_params
    offset = int_param(q.get("offset"), "offset", 0) or 0
    limit = int_param(q.get("limit"), "limit", 0) or 0
    desc = q.get("orderBy") == "ORDER_BY_DESC"
    sort_attr = q.get("sortByAttr") or q.get("sortBy") or "SORT_BY_END_TIME"
    sort_metric = q.get("sortByMetric")
    states = [unstate(s) for s in q.getlist("states") if s]
    with master_of(request).db.read() as session:
        check(session)
        stmt = select(Checkpoint).where(condition)
        if states:
            stmt = stmt.where(Checkpoint.state.in_(states))
        rows = list(session.scalars(stmt.order_by(Checkpoint.id)))
        out = [_serialize.checkpoint(session, r) for r in rows]
        if sort_metric or sort_attr == "SORT_BY_SEARCHER_METRIC":

            def key(c: dict[str, Any]) -> tuple[int, float]:
                training = c.get("training") or {}
                if sort_metric:
                    value = to_float(
                        (training.get("validationMetrics") or {})
                        .get("avgMetrics", {})
                        .get(sort_metric)
                    )
                else:
                    value = to_float(training.get("searcherMetric"))
                return (1, 0.0) if value is None else (0, value)

            out.sort(key=key)
            if desc:
                scored = [c for c in out if key(c)[0] == 0][::-1]
                out = scored + [c for c in out if key(c)[0] == 1]
        else:
            attr = {
                "SORT_BY_UUID": lambda c: c["uuid"],
                "SORT_BY_TRIAL_ID": lambda c: c["training"].get("trialId") or 0,
                "SORT_BY_BATCH_NUMBER": lambda c: int(c["metadata"].get("steps_completed", 0)),
                "SORT_BY_STATE": lambda c: c["state"],
            }.get(sort_attr, lambda c: c["reportTime"] or "")
            out.sort(key=attr, reverse=desc)
        total = len(out)
        page = out[offset : offset + limit] if limit else out[offset:]
        return {
            "checkpoints": page,
            "pagination": pagination(offset, limit, len(page), total),
        }


@router.get("/api/v1/experiments/{experiment_id}/checkpoints")
def experiment_checkpoints(
    request: Request, experiment_id: int, p: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """The checkpoints of an experiment."""

    def check(session: Any) -> None:
        if session.get(Experiment, experiment_id) is None:
            raise APIError(404, f"experiment {experiment_id} not found")

    return list_checkpoints(request, Checkpoint.experiment_id == experiment_id, check)


del Metric
