"""JSON the UI's scripts need that the REST API lacks, under ``/ui/api/...``.

Same authentication as ``/api/v1`` (Bearer header or the session cookie); errors are the API's
JSON errors. Chart data is read from the metric tiles (see :mod:`._series`) and gzip-compressed.
"""

from __future__ import annotations

import collections
import gzip
from typing import Any

import orjson
from fastapi import APIRouter, Depends, Request
from starlette.responses import Response

from determined.master._api._deps import Principal, authenticate, master_of
from determined.master._core._authz import Permission
from determined.master._wire import APIError
from determined.master.ui import (
    _access,
    _log_queries,
    _queries,
    _series,
    _trial_pages,
    _workspace_queries,
)

router = APIRouter(tags=["Web UI"], include_in_schema=False)

MAX_CURVE_TRIALS = 1000
GZIP_MIN_BYTES = 2048
RESPONSE_CACHE_SIZE = 8


def json_response(request: Request, payload: Any) -> Response:
    """orjson, gzip-compressed when the client accepts it and the body is worth it."""
    body = orjson.dumps(payload, option=orjson.OPT_NON_STR_KEYS)
    headers = {"Cache-Control": "no-store"}
    if len(body) >= GZIP_MIN_BYTES and "gzip" in request.headers.get("accept-encoding", ""):
        body = gzip.compress(body, compresslevel=5)
        headers["Content-Encoding"] = "gzip"
        headers["Vary"] = "Accept-Encoding"
    return Response(body, media_type="application/json", headers=headers)


def int_arg(value: Any, name: str, default: int | None = None) -> int | None:
    if value in (None, ""):
        return default
    try:
        return int(value)
    except (TypeError, ValueError):
        raise APIError(400, f"{name}: must be an integer, got {value!r}") from None


def id_list(value: str | None, name: str) -> list[int]:
    """``1,2,3`` -> [1, 2, 3] (400 naming ``name`` otherwise)."""
    out: list[int] = []
    for part in (value or "").replace(" ", "").split(","):
        if part:
            number = int_arg(part, name)
            if number is not None and number not in out:
                out.append(number)
    return out


def _width(request: Request) -> int:
    width = int_arg(request.query_params.get("width"), "width", 1000) or 1000
    return max(50, min(width, 4000))


def pick_metric(
    groups: dict[str, list[str]], group: str, metric: str, searcher_metric: str
) -> tuple[str, str]:
    """The (group, metric) to draw: the one asked for, else the searcher metric's, else the first."""
    if group and group not in groups:
        raise APIError(400, f"group: no trial reported metrics in group {group!r}")
    if not group:
        group = next(
            (g for g in ("validation", "training") if searcher_metric in groups.get(g, [])),
            next(iter(groups), ""),
        )
    names = groups.get(group, [])
    if metric and metric not in names:
        raise APIError(400, f"metric: no trial reported {metric!r} in group {group!r}")
    if not metric:
        metric = searcher_metric if searcher_metric in names else (names[0] if names else "")
    return group, metric


def curves_payload(
    request: Request,
    rows: list[_queries.TrialRow],
    labels: dict[int, dict[str, Any]],
    searcher_metric: str,
) -> dict[str, Any]:
    """Decimated curves of one metric for ``rows`` (trials), sharing one x range."""
    q = request.query_params
    groups = _queries.merge_groups(rows)
    group, metric = pick_metric(
        groups, q.get("group") or "", q.get("metric") or "", searcher_metric
    )
    width = _width(request)
    found = _series.curves(master_of(request).db, [r.id for r in rows], group, metric, width)
    trials = []
    total = 0
    for row in rows:
        curve = found.get(row.id) if metric else None
        total += curve.points if curve is not None else 0
        trials.append(
            {
                **labels.get(row.id, {}),
                "id": row.id,
                "experimentId": row.experiment_id,
                "state": row.state,
                "hparams": _queries.flatten_hparams(row.hparams),
                "best": row.best,
                "latest": row.latest,
                "points": curve.points if curve is not None else 0,
                "x": curve.x if curve is not None else [],
                "y": curve.y if curve is not None else [],
            }
        )
    return {
        "groups": groups,
        "group": group,
        "metric": metric,
        "searcherMetric": searcher_metric,
        "reportedPoints": total,
        "trials": trials,
        "preview": 0,
    }


def cached_json(request: Request, key: tuple[Any, ...], build: Any) -> Response:
    """:func:`json_response` of ``build()``, remembered under ``key`` (which must name everything
    the payload depends on): reloading a finished experiment's chart costs no encoding at all."""
    state = request.app.state
    cache: collections.OrderedDict[tuple[Any, ...], Response] | None = getattr(
        state, "ui_response_cache", None
    )
    if cache is None:
        cache = collections.OrderedDict()
        state.ui_response_cache = cache
    gzip_ok = "gzip" in request.headers.get("accept-encoding", "")
    full_key = (*key, gzip_ok)
    hit = cache.get(full_key)
    if hit is not None:
        cache.move_to_end(full_key)
        return Response(hit.body, media_type="application/json", headers=dict(hit.headers))
    payload = build()
    response = json_response(request, payload)
    if payload.get("preview"):
        return response  # a sample: the next call brings the whole curves
    cache[full_key] = response
    while len(cache) > RESPONSE_CACHE_SIZE:
        cache.popitem(last=False)
    return response


def _rows_key(rows: list[_queries.TrialRow]) -> tuple[Any, ...]:
    return tuple((r.id, r.version, r.state, r.best, r.latest) for r in rows)


@router.get("/ui/api/experiments/{experiment_id}/curves")
def experiment_curves(
    request: Request, experiment_id: int, p: Principal = Depends(authenticate)
) -> Response:
    """Learning curves of an experiment's trials (``group``, ``metric``, ``width``): all of them,
    or the best :data:`_trial_pages.CHART_TRIALS` by the searcher metric when there are more
    (``totalTrials`` says how many there are)."""
    visible = _access.visible_workspaces(request, p)
    with master_of(request).db.read() as session:
        exp, _ = _queries.get_experiment(session, experiment_id, visible)
        rows = _trial_pages.best_rows(session, exp)
        total = _trial_pages.trial_stats(session, exp).count
        metric, smaller = _queries.searcher_of(exp.config)
    q = request.query_params
    key = ("experiment", experiment_id, q.get("group"), q.get("metric"), _width(request), total)

    def build() -> dict[str, Any]:
        payload = curves_payload(request, rows, {}, metric)
        payload["smallerIsBetter"] = smaller
        payload["totalTrials"] = total
        return payload

    return cached_json(request, (*key, _rows_key(rows)), build)


@router.get("/ui/api/curves")
def compare_curves(request: Request, p: Principal = Depends(authenticate)) -> Response:
    """Curves of trials of any experiments (``trials=1,2,...``), with their experiments' names."""
    ids = id_list(request.query_params.get("trials"), "trials")
    if len(ids) > MAX_CURVE_TRIALS:
        raise APIError(400, f"trials: at most {MAX_CURVE_TRIALS} trials at once")
    visible = _access.visible_workspaces(request, p)
    with master_of(request).db.read() as session:
        rows = _queries.trials_by_id(session, ids, visible)
        missing = sorted(set(ids) - {r.id for r in rows})
        if missing:
            raise APIError(404, f"trials: no trial {', '.join(map(str, missing))}")
        exps = {}
        for row in rows:
            if row.experiment_id not in exps:
                exp, _ = _queries.get_experiment(session, row.experiment_id)
                exps[row.experiment_id] = exp
    labels = {}
    metrics = set()
    for row in rows:
        exp = exps[row.experiment_id]
        name, _ = _queries.searcher_of(exp.config)
        metrics.add(name)
        labels[row.id] = {
            "experimentName": str(exp.config.get("name") or ""),
            "searcherMetric": name,
        }
    searcher_metric = metrics.pop() if len(metrics) == 1 else ""
    return json_response(request, curves_payload(request, rows, labels, searcher_metric))


@router.get("/ui/api/trials/{trial_id}/metrics")
def trial_metrics(
    request: Request, trial_id: int, p: Principal = Depends(authenticate)
) -> Response:
    """Every numeric metric of every group of a trial, decimated to ``width`` columns."""
    visible = _access.visible_workspaces(request, p)
    with master_of(request).db.read() as session:
        run, _ = _queries.get_trial(session, trial_id, visible)
        rows = _queries.trial_rows(session, [run], {})
    row = rows[0]
    charts = [
        {"group": group, "metric": name, "points": c.points, "x": c.x, "y": c.y}
        for (group, name), c in _series.trial_curves(
            master_of(request).db, row.id, _width(request)
        ).items()
        if c.points
    ]
    return json_response(request, {"trialId": trial_id, "state": row.state, "charts": charts})


@router.get("/ui/api/trials/{trial_id}/logs")
def trial_logs(request: Request, trial_id: int, p: Principal = Depends(authenticate)) -> Response:
    """Log lines after ``after`` (or the last ``tail``), filtered by ``rank``, ``level``, ``q``."""
    q = request.query_params
    after = int_arg(q.get("after"), "after", 0) or 0
    tail = int_arg(q.get("tail"), "tail", 1000) or 1000
    rank = int_arg(q.get("rank"), "rank")
    visible = _access.visible_workspaces(request, p)
    with master_of(request).db.read() as session:
        run, _ = _queries.get_trial(session, trial_id, visible)
        logs = _log_queries.trial_logs(
            session,
            run,
            after=after,
            tail=max(1, min(tail, 10000)),
            rank=rank,
            level=q.get("level") or "",
            text=q.get("q") or "",
        )
        state = run.state
    last = logs[-1]["id"] if logs else after
    return json_response(
        request,
        {"logs": logs, "last": last, "state": state, "done": _queries.is_terminal(state)},
    )


@router.get("/ui/api/trials/search")
def search_trials(request: Request, p: Principal = Depends(authenticate)) -> Response:
    """Trials matching ``q`` (a trial id, an experiment id or part of an experiment's name)."""
    text = request.query_params.get("q") or ""
    visible = _access.visible_workspaces(request, p)
    with master_of(request).db.read() as session:
        found = _queries.search_trials(session, text, visible=visible)
    return json_response(request, {"trials": found})


@router.get("/ui/api/experiments/{experiment_id}/hparams")
def experiment_hparams(
    request: Request, experiment_id: int, p: Principal = Depends(authenticate)
) -> Response:
    """Flattened hyperparameters, best searcher metric and parent (the trial it was warm-started
    from: PBT's lineage) of each trial (the hparam view)."""
    visible = _access.visible_workspaces(request, p)
    with master_of(request).db.read() as session:
        exp, _ = _queries.get_experiment(session, experiment_id, visible)
        trials = _trial_pages.hparam_points(session, exp)
        metric, smaller = _queries.searcher_of(exp.config)
    names: dict[str, None] = {}
    for trial in trials:
        trial["hparams"] = flat = _queries.flatten_hparams(trial["hparams"])
        names.update(dict.fromkeys(flat))
    return json_response(
        request,
        {"metric": metric, "smallerIsBetter": smaller, "hparams": list(names), "trials": trials},
    )


@router.get("/ui/api/workspaces/{workspace_id}/permissions")
def workspace_permissions(
    request: Request, workspace_id: int, p: Principal = Depends(authenticate)
) -> Response:
    """The caller's permissions on a workspace it can see (``PERMISSION_TYPE_...`` names) and
    the UI actions they allow (``{"update": true, "metadata": false, ...}``); 404 otherwise."""
    visible = _access.visible_workspaces(request, p, Permission.VIEW_WORKSPACE)
    with master_of(request).db.read() as session:
        _workspace_queries.get_workspace(session, workspace_id, visible)
    return json_response(request, _access.permissions(request, p, workspace_id))
