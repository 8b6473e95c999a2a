"""What a trial's allocation token may touch: its own trial, allocation, task and experiment.

A trial process authenticates with its allocation token (``DET_SESSION_TOKEN``, sent as
``Grpc-Metadata-x-allocation-token`` or as a bearer token). The token acts for the experiment's owner,
but only on the routes a trial needs about itself: reporting metrics, progress and checkpoints,
searcher operations, its preemption signal and readiness, its logs and run metadata, and reading its
own experiment and trial (and, read-only, the checkpoints of its experiment or the one it started
from). Everything else answers 403 naming the route; the same route on another trial answers 403
too. For other SDK calls a trial has the owner's own session (``DET_USER_TOKEN``).

:func:`check` runs in ``authenticate`` for every request carrying such a token, so no route can
forget it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from determined.master._wire import APIError, get

if TYPE_CHECKING:
    from fastapi import Request

    from determined.master._api._deps import Principal

_ANY = "*"

_OPEN = {
    ("GET", "/api/v1/master"),
    ("GET", "/api/v1/me"),
    ("GET", "/api/v1/auth/user"),
    ("GET", "/api/v1/users/me"),
}
"""Routes that say nothing about other trials."""

_PREFIXES = (
    (_ANY, "/api/v1/trials/{trial_id}"),
    (_ANY, "/api/v1/runs/{run_id}/"),
    (_ANY, "/api/v1/allocations/{allocation_id}/"),
    ("GET", "/api/v1/experiments/{experiment_id}"),
    ("GET", "/api/v1/tasks/{task_id}"),
    (_ANY, "/api/v1/checkpoints/{uuid}"),
    ("GET", "/checkpoints/{uuid}"),
)
"""Route templates (by prefix) whose path parameters name what they touch."""

_BODY_ROUTES: dict[tuple[str, str], Callable[[Principal, Any], list[tuple[str, Any]]]] = {}
"""Routes whose body names what they touch: (method, template) -> [(kind, value), ...]."""


def _body_route(method: str, template: str) -> Callable[[Any], Any]:
    def register(fn: Any) -> Any:
        _BODY_ROUTES[(method, template)] = fn
        return fn

    return register


@_body_route("POST", "/api/v1/runs/start")
def _run_start(p: Principal, body: Any) -> list[tuple[str, Any]]:
    return [("trial", get(_obj(body), "run_id"))]


@_body_route("POST", "/api/v1/checkpoints")
def _checkpoint_report(p: Principal, body: Any) -> list[tuple[str, Any]]:
    ckpt = get(_obj(body), "checkpoint")
    ckpt = ckpt if isinstance(ckpt, dict) else _obj(body)
    names = [("task", get(ckpt, "task_id")), ("allocation", get(ckpt, "allocation_id"))]
    return [(kind, value) for kind, value in names if value]


@_body_route("PATCH", "/api/v1/checkpoints")
def _checkpoint_patch(p: Principal, body: Any) -> list[tuple[str, Any]]:
    items = get(_obj(body), "checkpoints") or []
    if not isinstance(items, list):
        return [("checkpoint", None)]
    return [("own_checkpoint", get(_obj(i), "uuid")) for i in items]


@_body_route("POST", "/api/v1/task/logs")
def _task_logs(p: Principal, body: Any) -> list[tuple[str, Any]]:
    logs = get(_obj(body), "logs") or []
    return [("task", get(_obj(entry), "task_id")) for entry in logs if isinstance(logs, list)]


@_body_route("POST", "/task-logs")
def _task_logs_legacy(p: Principal, body: Any) -> list[tuple[str, Any]]:
    entries = body if isinstance(body, list) else []
    return [("task", get(_obj(entry), "task_id")) for entry in entries]


@_body_route("POST", "/api/v1/webhooks/custom")
def _webhook(p: Principal, body: Any) -> list[tuple[str, Any]]:
    claims = [("trial", get(_obj(body), "trial_id"))]
    if get(_obj(body), "experiment_id") is not None:
        claims.append(("experiment", get(_obj(body), "experiment_id")))
    return claims


@_body_route("POST", "/api/v1/trial-source-info")
def _trial_source(p: Principal, body: Any) -> list[tuple[str, Any]]:
    info = get(_obj(body), "trial_source_info")
    return [("trial", get(_obj(info), "trial_id"))]


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _template(request: Request) -> str:
    route = request.scope.get("route")
    return str(getattr(route, "path", request.url.path))


def needs_body(request: Request) -> bool:
    """Whether :func:`check` needs the request's JSON body for this route."""
    return (request.method, _template(request)) in _BODY_ROUTES


def check(request: Request, p: Principal, body: Any = None) -> None:
    """403 unless an allocation-token caller ``p`` touches only its own trial (see the module
    docstring); ``body`` is the decoded JSON body when :func:`needs_body` says so."""
    method, template = request.method, _template(request)
    if (method, template) in _OPEN:
        return
    refused = APIError(
        403,
        f"a trial's allocation token may not call {method} {template}"
        " (it only reaches its own trial; use the owner's session, DET_USER_TOKEN, for the SDK)",
    )
    claims: list[tuple[str, Any]]
    body_route = _BODY_ROUTES.get((method, template))
    if body_route is not None:
        claims = body_route(p, body)
    elif any(m in (_ANY, method) and template.startswith(prefix) for m, prefix in _PREFIXES):
        claims = []
    else:
        raise refused
    params = request.path_params
    for name, kind in (
        ("trial_id", "trial"),
        ("run_id", "trial"),
        ("experiment_id", "experiment"),
        ("allocation_id", "allocation"),
        ("task_id", "task"),
    ):
        if name in params:
            claims.append((kind, params[name]))
    if "uuid" in params:
        claims.append(("checkpoint" if method == "GET" else "own_checkpoint", params["uuid"]))
    for kind, value in claims:
        if not _owns(request, p, kind, value):
            raise APIError(
                403,
                f"a trial's allocation token only reaches its own trial: {kind} {value!r} is not"
                f" trial {p.trial_id}'s",
            )


def _owns(request: Request, p: Principal, kind: str, value: Any) -> bool:
    if value is None or value == "":
        return False
    if kind == "trial":
        return str(value) == str(p.trial_id)
    if kind == "experiment":
        return str(value) == str(p.experiment_id)
    if kind == "allocation":
        return str(value) == str(p.allocation_id)
    if kind == "task":
        return str(value) == str(p.task_id)
    return _owns_checkpoint(request, p, str(value), write=kind == "own_checkpoint")


def _owns_checkpoint(request: Request, p: Principal, uuid: str, *, write: bool) -> bool:
    """A checkpoint of the trial (to change), or of its experiment or the one it started from (to
    read)."""
    from determined.master._api._deps import master_of
    from determined.master.db import Checkpoint, Run

    with master_of(request).db.read() as session:
        row = session.query(Checkpoint).filter(Checkpoint.uuid == uuid).one_or_none()
        if row is None:
            # Unknown uuid: the route answers 404 for a checkpoint nobody reported yet.
            return not write
        if row.trial_id == p.trial_id:
            return True
        if write:
            return False
        if row.experiment_id == p.experiment_id:
            return True
        run = session.get(Run, p.trial_id)
        return run is not None and run.warm_start_checkpoint_uuid == uuid
