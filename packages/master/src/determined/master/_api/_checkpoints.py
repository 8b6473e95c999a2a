"""Checkpoint routes: report, describe, metadata, delete, and listings."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import Depends, Request
from sqlalchemy import select
from sqlalchemy.orm import Session

from determined.master._api import _serialize
from determined.master._api._access import (
    P,
    on_checkpoint,
    on_experiment,
    require_checkpoint,
    require_trial,
)
from determined.master._api._deps import (
    Principal,
    authenticate,
    checkpoints_of,
    int_param,
    json_body,
    master_of,
)
from determined.master._api._json_route import api_router
from determined.master._core._checkpoints import CheckpointReport
from determined.master._core._checkpoints import get_checkpoint as find_checkpoint
from determined.master._wire import (
    APIError,
    get,
    pagination,
    parse_ts,
    sub_object,
    to_float,
    unstate,
)
from determined.master.db import (
    Checkpoint,
    Experiment,
    Metric,
    Run,
    Task,
    registered_versions,
    utcnow,
)

router = api_router(tags=["Checkpoints"])

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
    report = CheckpointReport(
        uuid=uuid,
        task_id=task_id,
        allocation_id=allocation_id,
        report_time=parse_ts(get(ckpt, "report_time")) or utcnow(),
        state=state,
        resources=resources,
        metadata=metadata,
        storage_id=int_param(get(ckpt, "storage_id"), "storageId"),
        steps_completed=int(float(steps)),
    )
    if p.allocation_id is None and task_id:
        with master_of(request).db.read() as session:
            trial_id = session.scalar(select(Task.trial_id).where(Task.task_id == task_id))
        if trial_id is not None:
            require_trial(request, p, trial_id, P.UPDATE_EXPERIMENT)
    checkpoints_of(request).report(report, p.allocation_id)
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
    remaining: list[tuple[str, dict[str, int]]] = []
    for index, item in enumerate(items):
        if not isinstance(item, dict) or not item.get("uuid"):
            raise APIError(400, f"checkpoints[{index}].uuid: required")
        res = item.get("resources") or {}
        if isinstance(res, dict) and isinstance(res.get("resources"), dict):
            res = res["resources"]
        remaining.append((str(item["uuid"]), _sizes(res, f"checkpoints[{index}].resources")))
    for uuid, _ in remaining:
        require_checkpoint(request, p, uuid, P.UPDATE_EXPERIMENT)
    checkpoints_of(request).record_remaining(remaining)
    return {}


@router.delete("/api/v1/checkpoints")
def delete_checkpoints(
    request: Request,
    body: dict[str, Any] = Depends(json_body),
    p: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """Mark checkpoints DELETED and start the GC tasks that delete their files (one per
    experiment, ``Checkpoint GC (Experiment N)``); answers before the files are gone."""
    uuids = get(body, "checkpoint_uuids")
    if not isinstance(uuids, list) or not all(isinstance(u, str) for u in uuids):
        raise APIError(400, "checkpointUuids: must be a list of uuids")
    for uuid in uuids:
        require_checkpoint(request, p, uuid, P.DELETE_EXPERIMENT)
    master = master_of(request)
    with master.db.read() as session:
        for uuid in uuids:
            find_checkpoint(session, uuid)
        in_registry = registered_versions(session, uuids)
    if in_registry:
        listed = "; ".join(f"{u} ({', '.join(v)})" for u, v in in_registry.items())
        raise APIError(
            400,
            "checkpointUuids: these checkpoints are registered in the model registry and cannot "
            f"be deleted (delete the model versions first): {listed}",
        )
    master.manager.checkpoint_gc.delete(uuids)
    return {}


@router.post("/api/v1/checkpoints/rm")
def remove_checkpoint_files(
    request: Request,
    body: dict[str, Any] = Depends(json_body),
    p: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """Start the GC tasks that delete the files of checkpoints matching ``checkpointGlobs`` from
    their storage and record what remains (an empty glob list only refreshes the recorded
    files); answers before they finish, as upstream."""
    from determined.core import plugins

    uuids = get(body, "checkpoint_uuids")
    globs = get(body, "checkpoint_globs") or []
    if not isinstance(uuids, list) or not all(isinstance(u, str) for u in uuids):
        raise APIError(400, "checkpointUuids: must be a list of uuids")
    if not isinstance(globs, list) or not all(isinstance(g, str) and g for g in globs):
        raise APIError(400, "checkpointGlobs: must be a list of glob patterns")
    for uuid in uuids:
        require_checkpoint(request, p, uuid, P.DELETE_EXPERIMENT)
    master = master_of(request)
    configs: dict[str, dict[str, Any]] = {}
    with master.db.read() as session:
        for uuid in uuids:
            configs[uuid] = _storage_config(session, find_checkpoint(session, uuid))
        in_registry = registered_versions(session, uuids) if globs else {}
    if in_registry:
        listed = "; ".join(f"{u} ({', '.join(v)})" for u, v in in_registry.items())
        raise APIError(
            400,
            "checkpointUuids: these checkpoints are registered in the model registry and their "
            f"files cannot be removed: {listed}",
        )
    for uuid, config in configs.items():
        try:
            plugins.checkpoint_storage(config)
        except ValueError as e:
            raise APIError(400, f"checkpoint {uuid}: checkpoint_storage: {e}") from None
    master.manager.checkpoint_gc.remove_files(list(configs), globs)
    return {}


@router.get("/api/v1/checkpoints/{uuid}", dependencies=[on_checkpoint(P.VIEW_EXPERIMENT_ARTIFACTS)])
def get_checkpoint(
    request: Request, uuid: str, p: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """One checkpoint."""
    with master_of(request).db.read() as session:
        return {"checkpoint": _serialize.checkpoint(session, find_checkpoint(session, uuid))}


@router.post(
    "/api/v1/checkpoints/{uuid}/metadata",
    dependencies=[on_checkpoint(P.UPDATE_EXPERIMENT_METADATA)],
)
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
    master = master_of(request)
    checkpoints_of(request).set_metadata(uuid, metadata)
    with master.db.read() as session:
        return {"checkpoint": _serialize.checkpoint(session, find_checkpoint(session, uuid))}


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
    order_given = q.get("orderBy") not in (None, "", "ORDER_BY_UNSPECIFIED")
    states = [unstate(s) for s in q.getlist("states") if s]
    with master_of(request).db.read() as session:
        check(session)
        stmt = select(Checkpoint).where(condition)
        if states:
            stmt = stmt.where(Checkpoint.state.in_(states))
        rows = list(session.scalars(stmt.order_by(Checkpoint.id)))
        out = [_serialize.checkpoint(session, r) for r in rows]
        if out and not order_given:
            desc = _best_first_is_desc(out[0], sort_attr, sort_metric)
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


@router.get(
    "/api/v1/experiments/{experiment_id}/checkpoints",
    dependencies=[on_experiment(P.VIEW_EXPERIMENT_ARTIFACTS)],
)
def experiment_checkpoints(
    request: Request, experiment_id: int, p: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """The checkpoints of an experiment."""

    def check(session: Any) -> None:
        if session.get(Experiment, experiment_id) is None:
            raise APIError(404, f"experiment {experiment_id} not found")

    return list_checkpoints(request, Checkpoint.experiment_id == experiment_id, check)


def _best_first_is_desc(sample: dict[str, Any], sort_attr: str, sort_metric: str | None) -> bool:
    """With no ``orderBy``, a sort by the searcher metric lists the best checkpoint first."""
    searcher = ((sample.get("training") or {}).get("experimentConfig") or {}).get("searcher") or {}
    by_searcher = sort_attr == "SORT_BY_SEARCHER_METRIC" and not sort_metric
    if not (by_searcher or (sort_metric and sort_metric == searcher.get("metric"))):
        return False
    return not bool(searcher.get("smaller_is_better", True))


def _storage_config(session: Session, ckpt: Checkpoint) -> dict[str, Any]:
    """The checkpoint storage a checkpoint was written to (its run's, else its experiment's)."""
    from determined.master.db import StorageBackend

    if ckpt.storage_id is not None:
        backend = session.get(StorageBackend, ckpt.storage_id)
        if backend is not None and backend.config:
            return dict(backend.config)
    exp_id = ckpt.experiment_id
    if exp_id is None and ckpt.trial_id is not None:
        run = session.get(Run, ckpt.trial_id)
        exp_id = run.experiment_id if run else None
    exp = session.get(Experiment, exp_id) if exp_id is not None else None
    if exp is None or not exp.config.get("checkpoint_storage"):
        raise APIError(404, f"checkpoint {ckpt.uuid}: its checkpoint storage is unknown")
    return dict(exp.config["checkpoint_storage"])


def _archive(storage_config: dict[str, Any], uuid: str, zip_format: bool) -> str:
    """Write checkpoint ``uuid`` into a temporary tar.gz (or zip) file; return its path."""
    import os
    import tarfile
    import tempfile
    import zipfile

    from determined.core import plugins

    manager = plugins.checkpoint_storage(storage_config)
    fd, path = tempfile.mkstemp(prefix=f"det-ckpt-{uuid}-", suffix=".zip" if zip_format else ".tgz")
    os.close(fd)
    try:
        with manager.restore_path(uuid) as root:
            if zip_format:
                with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
                    for file in sorted(p for p in root.rglob("*") if p.is_file()):
                        archive.write(file, file.relative_to(root).as_posix())
            else:
                with tarfile.open(path, "w:gz") as archive:
                    for entry in sorted(root.iterdir()):
                        archive.add(entry, arcname=entry.name)
    except BaseException:
        os.unlink(path)
        raise
    return path


@router.get(
    "/checkpoints/{uuid}",
    tags=["Checkpoints"],
    dependencies=[on_checkpoint(P.VIEW_EXPERIMENT_ARTIFACTS)],
)
def download_checkpoint(request: Request, uuid: str, p: Principal = Depends(authenticate)) -> Any:
    """A checkpoint's files proxied through the master: a tar.gz (``Accept: application/gzip``,
    the default) or a zip (``Accept: application/zip``)."""
    import os

    from fastapi.responses import FileResponse
    from starlette.background import BackgroundTask

    from determined.storage import CheckpointNotFound

    accept = request.headers.get("accept", "")
    zip_format = "application/zip" in accept and "application/gzip" not in accept
    with master_of(request).db.read() as session:
        ckpt = find_checkpoint(session, uuid)
        if ckpt.state not in ("COMPLETED", "PARTIALLY_DELETED"):
            raise APIError(
                400,
                f"checkpoint {uuid} is {ckpt.state}: only COMPLETED or PARTIALLY_DELETED "
                "checkpoints can be downloaded",
            )
        storage_config = _storage_config(session, ckpt)
    try:
        path = _archive(storage_config, uuid, zip_format)
    except CheckpointNotFound:
        raise APIError(
            404, f"checkpoint {uuid}: its files are not in the checkpoint storage"
        ) from None
    except (ValueError, ImportError) as e:
        raise APIError(400, f"checkpoint {uuid}: cannot read its storage: {e}") from None
    return FileResponse(
        path,
        media_type="application/zip" if zip_format else "application/gzip",
        filename=f"{uuid}.zip" if zip_format else f"{uuid}.tar.gz",
        background=BackgroundTask(os.unlink, path),
    )


del Metric
