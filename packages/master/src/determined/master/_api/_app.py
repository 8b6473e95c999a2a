"""The FastAPI application: routers, error handlers and the master's own description routes."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import traceback
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from determined.master import ui
from determined.master._api import (
    _checkpoints,
    _cluster,
    _experiments,
    _models,
    _tasks,
    _trial_sources,
    _trials,
    _users,
)
from determined.master._api._deps import (
    AuthCache,
    Principal,
    authenticate,
    bool_param,
    cluster_messages_of,
    int_param,
    json_body,
    log_settings_of,
    master_of,
    path_ints_in_range,
    require_admin,
)
from determined.master._api._json_route import api_router
from determined.master._api._metric_stream import StreamCache
from determined.master._wire import APIError, error_body, get, pagination

if TYPE_CHECKING:
    from determined.master._master import Master

logger = logging.getLogger("determined.master")

info_router = api_router(tags=["Cluster"])


@info_router.get("/api/v1/master")
def get_master(request: Request) -> dict[str, Any]:
    """Version and identity of this master, and the active cluster message (no authentication
    needed)."""
    answer = master_of(request).describe()
    notice = cluster_messages_of(request).active()
    if notice is not None:
        answer["clusterMessage"] = _cluster.notice_json(notice)
    return answer


@info_router.get("/info")
def info(request: Request) -> dict[str, Any]:
    """Upstream's older ``MasterInfo`` (snake_case keys; its e2e tests read ``cluster_id`` here).
    No ``sso_providers`` key: upstream omits it when empty, and its tests take its presence to mean
    the enterprise edition."""
    described = master_of(request).describe()
    return {
        "version": described["version"],
        "master_id": described["masterId"],
        "cluster_id": described["clusterId"],
        "cluster_name": described["clusterName"],
        "telemetry": {"enabled": False, "segment_key": ""},
    }


@info_router.get("/health")
def health(request: Request) -> dict[str, Any]:
    """Liveness and database reachability, as upstream's ``HealthCheck`` ("up"/"down")."""
    from sqlalchemy import text

    master = master_of(request)
    try:
        with master.db.read() as session:
            session.execute(text("SELECT 1"))
        db_ok = True
    except Exception:
        db_ok = False
    state = "up" if db_ok else "down"
    managers = [{"cluster_name": master.config.cluster_name, "status": "up"}]
    return {"status": state, "database": state, "resource_managers": managers}


@info_router.get("/api/v1/master/config")
def master_config(request: Request, p: Principal = Depends(authenticate)) -> dict[str, Any]:
    """The master's settings (no secrets; admins only, as upstream)."""
    require_admin(p)
    cfg = master_of(request).config
    return {
        "config": {
            "host": cfg.host,
            "port": cfg.port,
            "checkpoint_storage": cfg.checkpoint_storage_config(),
            "resource_manager": cfg.resource_manager_config(),
            "cluster_name": cfg.cluster_name,
            "log": log_settings_of(request).describe(),
            # a trial with no node left to run on (log policies) errors instead of waiting
            "launch_error": True,
            "task_container_defaults": cfg.task_container_defaults,
            "resource_pools": cfg.resource_pools,
        }
    }


@info_router.patch("/api/v1/master/config")
def patch_master_config(
    request: Request,
    body: dict[str, Any] = Depends(json_body),
    p: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """Change the log level or colour until the master restarts (``config.log`` with a
    ``fieldMask`` naming ``log.level``/``log.color``; admins only, as upstream)."""
    require_admin(p)
    mask = get(body, "field_mask")
    paths = mask.get("paths") if isinstance(mask, dict) else None
    if not isinstance(paths, list) or not paths:
        raise APIError(400, "fieldMask.paths: name the fields to change (log.level, log.color)")
    unknown = [x for x in paths if x not in ("log.level", "log.color")]
    if unknown:
        raise APIError(400, f"fieldMask.paths: unsupported fields {unknown}")
    config = body.get("config")
    log = config.get("log") if isinstance(config, dict) else None
    if not isinstance(log, dict):
        raise APIError(400, "config.log: required")
    level = log.get("level") if "log.level" in paths else None
    color = log.get("color") if "log.color" in paths else None
    if "log.level" in paths and not isinstance(level, str):
        raise APIError(400, "config.log.level: must be a LOG_LEVEL_* name")
    if "log.color" in paths and not isinstance(color, bool):
        raise APIError(400, "config.log.color: must be true or false")
    log_settings_of(request).change(level=level, color=color)
    return {}


_STATIC_POOL_FIELDS: dict[str, Any] = {
    **dict.fromkeys(
        (
            "agentDockerImage",
            "agentDockerNetwork",
            "agentDockerRuntime",
            "agentFluentImage",
            "containerStartupScript",
            "description",
            "imageId",
            "instanceType",
            "location",
            "masterCertName",
            "masterUrl",
            "startupScript",
        ),
        "",
    ),
    **dict.fromkeys(
        (
            "auxContainerCapacity",
            "auxContainerCapacityPerAgent",
            "auxContainersRunning",
            "maxAgentStartingPeriod",
            "maxAgents",
            "maxIdleAgentPeriod",
            "minAgents",
        ),
        0,
    ),
    "preemptible": False,
    "resourceManagerMetadata": {},
    "schedulerFittingPolicy": "FITTING_POLICY_BEST",
}


@info_router.get("/api/v1/resource-pools")
def resource_pools(request: Request, p: Principal = Depends(authenticate)) -> dict[str, Any]:
    """The one resource pool of the local resource manager."""
    describe = master_of(request).rm.describe()
    return {
        "resourcePools": [
            {
                "name": "default",
                "type": "RESOURCE_POOL_TYPE_STATIC",
                "defaultComputePool": True,
                "defaultAuxPool": True,
                "schedulerType": "SCHEDULER_TYPE_PRIORITY",
                "slotType": "TYPE_CUDA" if describe.get("slot_type") == "cuda" else "TYPE_CPU",
                "slotsAvailable": describe.get("slots", 0),
                "slotsUsed": describe.get("used", 0),
                "numAgents": 1,
                "details": describe,
                # upstream's other required fields, so its own clients parse the pool
                **_STATIC_POOL_FIELDS,
                "clusterName": master_of(request).config.cluster_name or "det",
            }
        ],
        "pagination": pagination(0, 1, 1, 1),
    }


@info_router.get("/api/v1/master/logs")
def master_logs(request: Request, p: Principal = Depends(authenticate)) -> StreamingResponse:
    """Stream the master's own log records (``follow`` keeps the stream open)."""
    master = master_of(request)
    q = request.query_params
    limit = int_param(q.get("limit"), "limit", 0) or 0
    follow = bool_param(q.get("follow"))
    offset = int_param(q.get("offset"), "offset", 0) or 0

    async def lines() -> AsyncIterator[bytes]:
        records = list(master.log_buffer)
        if limit:
            records = records[-limit:]
        elif offset:
            records = records[offset:]
        last = records[-1]["id"] if records else 0
        for entry in records:
            yield (json.dumps({"result": {"logEntry": entry}}) + "\n").encode()
        while follow and not await request.is_disconnected():
            await asyncio.sleep(0.2)
            for entry in list(master.log_buffer):
                if entry["id"] > last:
                    last = entry["id"]
                    yield (json.dumps({"result": {"logEntry": entry}}) + "\n").encode()

    return StreamingResponse(lines(), media_type="application/json")


def create_app(master: Master) -> FastAPI:
    """Build the API application bound to ``master``."""

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        master.manager.allocations.loop = asyncio.get_running_loop()
        yield
        proxy_client = getattr(_app.state, "proxy_client", None)
        if proxy_client is not None:
            await proxy_client.aclose()

    app = FastAPI(
        lifespan=lifespan,
        dependencies=[Depends(path_ints_in_range)],
        title="det master",
        version=master.version,
        description="Determined-compatible REST API of det-master.",
        openapi_url="/api/v1/openapi.json",
        docs_url="/api/v1/docs",
        redoc_url=None,
    )
    app.state.master = master
    app.state.auth_cache = AuthCache(master)
    app.state.metric_stream_cache = StreamCache()
    from determined.master._api._body_limit import BodyLimit

    app.add_middleware(BodyLimit, limit=master.config.limits_config().max_request_body_bytes)

    @app.get("/openapi.json", include_in_schema=False)
    def openapi_alias() -> dict[str, Any]:
        return app.openapi()

    @app.exception_handler(APIError)
    async def api_error(_request: Request, exc: APIError) -> JSONResponse:
        return JSONResponse(error_body(exc.status, exc.message), status_code=exc.status)

    @app.exception_handler(RequestValidationError)
    async def validation_error(_request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = []
        for err in exc.errors():
            where = ".".join(
                str(x) for x in err.get("loc", ()) if x not in ("path", "query", "body")
            )
            problems.append(f"{where}: {err.get('msg')}")
        return JSONResponse(
            error_body(400, "; ".join(problems) or "invalid request"), status_code=400
        )

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        status = exc.status_code if 400 <= exc.status_code < 600 else 400
        detail = exc.detail if isinstance(exc.detail, str) else json.dumps(exc.detail)
        if status == 404 and detail == "Not Found":
            detail = f"no such endpoint: {_request.method} {_request.url.path}"
        return JSONResponse(error_body(status, detail), status_code=status)

    @app.exception_handler(Exception)
    async def internal_error(request: Request, exc: Exception) -> JSONResponse:
        from determined.master._core._db_errors import RETRY_AFTER_S, unavailable

        outage = unavailable(exc)
        if outage is not None:  # a database outage: nothing committed, the client may retry
            logger.warning("master: %s %s: %s", request.method, request.url.path, outage.message)
            return JSONResponse(
                error_body(503, outage.message),
                status_code=503,
                headers={"Retry-After": str(RETRY_AFTER_S)},
            )
        logger.error(
            "master: unhandled error on %s %s:\n%s",
            request.method,
            request.url.path,
            "".join(traceback.format_exception(exc)),
        )
        return JSONResponse(error_body(500, f"internal error: {exc}"), status_code=500)

    # Routes match in registration order: the routes every running trial hits come first, so its
    # request does not try every other route's pattern before its own. The searcher operations'
    # two (a trial's every operation; their paths overlap no other route's) lead.
    from determined.master._api import _metric_series, _searcher_ops

    app.include_router(_searcher_ops.router)
    # Six metric-read routes next: /api/v1/trials/time-series must not match /trials/{trial_id}.
    app.include_router(_metric_series.router)
    # Then the trial-reporting routes.
    app.include_router(_trials.router)
    app.include_router(info_router)
    app.include_router(_users.router)
    from determined.master._api import _tokens

    app.include_router(_tokens.router)
    from determined.master._api import _labels, _templates

    app.include_router(_labels.router)
    app.include_router(_experiments.router)
    from determined.master._api import _experiment_actions

    app.include_router(_experiment_actions.router)
    from determined.master._api import _bulk_experiments

    app.include_router(_bulk_experiments.router)
    app.include_router(_templates.router)
    app.include_router(_checkpoints.router)
    app.include_router(_models.router)
    app.include_router(_tasks.router)
    from determined.master._api import _log_fields

    app.include_router(_log_fields.router)
    from determined.master._api import _tensorboards

    app.include_router(_tensorboards.router)
    from determined.master._api import _unmanaged

    app.include_router(_unmanaged.router)
    app.include_router(_trial_sources.router)
    app.include_router(_cluster.router)
    from determined.master._api import _runs

    app.include_router(_runs.router)
    from determined.master._api import _agents

    app.include_router(_agents.router)
    from determined.master._api import _projects

    app.include_router(_projects.router)
    from determined.master._api import _workspaces

    app.include_router(_workspaces.router)
    from determined.master._api import _rbac

    app.include_router(_rbac.router)
    from determined.master._api import _webhooks

    app.include_router(_webhooks.router)
    from determined.master._api import _config_policies

    app.include_router(_config_policies.router)
    from determined.master._api import _commands, _notebooks, _proxy

    app.include_router(_commands.router)
    app.include_router(_notebooks.router)
    app.include_router(_proxy.router)
    ui.install(app)  # the web UI: /, /login, /experiments, ..., /ui/...; never under /api/v1

    return app
