"""Metric routes that read across trials: upstream's "compare trials" time series
(``GET /api/v1/trials/time-series``), the experiment metric streams of its web UI
(``/api/v1/experiments/.../metrics-stream/...``) and a project's metric ranges.

The streams answer newline-delimited JSON ``{"result": ...}`` lines: one right away, then one every
``period_seconds`` (default 30, as upstream) with what is new, until the experiments are terminal
(the last line is read after that was seen, so it holds every report) or the client leaves.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import Depends, Request
from fastapi.responses import StreamingResponse
from sqlalchemy import select
from starlette.concurrency import run_in_threadpool

from determined.master._api import _serialize
from determined.master._api._access import P, require_experiment, require_project, require_trial
from determined.master._api._deps import Principal, authenticate, int_param, master_of
from determined.master._api._json_route import api_router
from determined.master._core import _metric_series as series
from determined.master._core._best_runs import metric_ranges
from determined.master._core._projects import find_project
from determined.master._wire import TERMINAL_STATES, APIError
from determined.master.db import Experiment, Run

router = api_router(tags=["Experiments"])

_DEFAULT_PERIOD_S = 30


def _camel(name: str) -> str:
    parts = name.split("_")
    return parts[0] + "".join(p[:1].upper() + p[1:] for p in parts[1:])


def _param(request: Request, name: str) -> str | None:
    """Query parameter ``name`` (snake_case) as sent in snake_case or camelCase."""
    q = request.query_params
    return q.get(name, q.get(_camel(name)))


def _params(request: Request, name: str) -> list[str]:
    """Every value of a repeated query parameter, in snake_case or camelCase."""
    q = request.query_params
    camel = _camel(name)
    found = q.getlist(name) + (q.getlist(camel) if camel != name else [])
    return [v for v in found if v != ""]


def _ids(request: Request, name: str) -> list[int]:
    """A repeated integer parameter's values, each once, in order; 400 naming it otherwise."""
    field = _camel(name)
    return list(dict.fromkeys(int(int_param(v, field) or 0) for v in _params(request, name)))


def _count(request: Request, name: str, default: int) -> int:
    """A non-negative integer parameter (0 or absent: ``default``); 400 naming it otherwise."""
    field = _camel(name)
    value = int_param(_param(request, name), field, 0) or 0
    if value < 0:
        raise APIError(400, f"{field}: must not be negative, got {value}")
    return value or default


def _line(result: dict[str, Any]) -> bytes:
    return (json.dumps({"result": result}) + "\n").encode()


def _all_terminal(request: Request, experiment_ids: list[int]) -> Callable[[], bool]:
    def done() -> bool:
        with master_of(request).db.read() as session:
            states = session.scalars(
                select(Experiment.state).where(Experiment.id.in_(experiment_ids))
            ).all()
        return all(s in TERMINAL_STATES or s == "DELETING" for s in states)

    return done


def _stream(
    request: Request, done: Callable[[], bool], step: Callable[[], dict[str, Any]]
) -> StreamingResponse:
    """Lines of ``step()`` every ``period_seconds`` until ``done()`` held before a read."""
    period = _count(request, "period_seconds", _DEFAULT_PERIOD_S)

    async def lines() -> AsyncIterator[bytes]:
        while True:
            finished = await run_in_threadpool(done)
            yield _line(await run_in_threadpool(step))
            if finished or await request.is_disconnected():
                return
            await asyncio.sleep(period)

    return StreamingResponse(lines(), media_type="application/json")


def _read(request: Request, fn: Callable[..., Any], *args: Any) -> Any:
    with master_of(request).db.read() as session:
        return fn(session, *args)


@router.get("/api/v1/trials/time-series")
def compare_trials(request: Request, p: Principal = Depends(authenticate)) -> dict[str, Any]:
    """Downsampled series of some metrics of some trials (upstream's ``CompareTrials``), each
    trial with one ``DownsampledMetrics`` per group that has points."""
    trial_ids = _ids(request, "trial_ids")
    if not trial_ids:
        raise APIError(400, "trialIds: at least one trial id is required")
    for trial_id in trial_ids:
        require_trial(request, p, trial_id, P.VIEW_EXPERIMENT_ARTIFACTS)
    names = _params(request, "metric_names")
    metric_ids = _params(request, "metric_ids")
    if names and metric_ids:
        raise APIError(400, "metricNames, metricIds: give one of them, not both")
    group = series.metric_group(
        _param(request, "metric_type"), _param(request, "group"), required=False
    )
    wanted: dict[str, list[str]] = series.parse_metric_ids(metric_ids)
    if names:
        for g in [group] if group else ["training", "validation"]:
            wanted[g] = names
    max_points = _count(request, "max_datapoints", 200)
    start = _count(request, "start_batches", 0)
    end = _count(request, "end_batches", 2**31 - 1)
    out = []
    with master_of(request).db.read() as session:
        for trial_id in trial_ids:
            run = session.get(Run, trial_id)
            if run is None:
                raise APIError(404, f"trial {trial_id} not found")
            metrics = []
            for g in sorted(wanted):
                data = series.series(session, trial_id, g, wanted[g], max_points, start, end)
                if data:
                    metrics.append({"data": data, "type": series.metric_type(g), "group": g})
            out.append({"trial": _serialize.trial(session, run), "metrics": metrics})
    return {"trials": out}


@router.get("/api/v1/experiments/metrics-stream/metric-names")
def metric_names_stream(
    request: Request, p: Principal = Depends(authenticate)
) -> StreamingResponse:
    """The metric names the experiments' trials report (upstream's ``ExpMetricNames``): the first
    line has the searcher metrics; every line only names not sent before."""
    ids = sorted(_ids(request, "ids"))
    if not ids:
        raise APIError(400, "ids: at least one experiment id is required")
    searcher: list[str] = []
    with master_of(request).db.read() as session:
        for exp_id in ids:
            require_experiment(request, p, exp_id, P.VIEW_EXPERIMENT_ARTIFACTS)
            exp = session.get(Experiment, exp_id)
            metric = ((exp.config or {}).get("searcher") or {}).get("metric") if exp else None
            if metric and metric not in searcher:
                searcher.append(metric)
    sent: dict[str, set[str]] = {}

    def step() -> dict[str, Any]:
        found = _read(request, series.metric_names, ids)
        fresh = {g: [n for n in names if n not in sent.get(g, set())] for g, names in found.items()}
        for g, names in fresh.items():
            sent.setdefault(g, set()).update(names)
        result = {
            "searcherMetrics": list(searcher),
            "trainingMetrics": fresh.get("training", []),
            "validationMetrics": fresh.get("validation", []),
            "metricNames": [{"group": g, "name": n} for g, names in fresh.items() for n in names],
        }
        searcher.clear()  # the searcher metrics go in the first line only
        return result

    return _stream(request, _all_terminal(request, ids), step)


def _experiment_metric(request: Request, p: Principal, experiment_id: int) -> tuple[str, str]:
    """The guarded experiment's ``(group, metric name)`` a stream asks for; 400 naming the field."""
    require_experiment(request, p, experiment_id, P.VIEW_EXPERIMENT_ARTIFACTS)
    name = _param(request, "metric_name")
    if not name:
        raise APIError(400, "metricName: required")
    group = series.metric_group(
        _param(request, "metric_type"), _param(request, "group"), required=True
    )
    assert group is not None
    return group, name


@router.get("/api/v1/experiments/{experiment_id}/metrics-stream/batches")
def metric_batches_stream(
    request: Request, experiment_id: int, p: Principal = Depends(authenticate)
) -> StreamingResponse:
    """The steps at which the experiment's trials reported a metric (upstream's
    ``MetricBatches``), each step once over the whole stream."""
    group, name = _experiment_metric(request, p, experiment_id)
    cursor = series.Cursor()

    def step() -> dict[str, Any]:
        return {"batches": _read(request, series.new_batches, experiment_id, group, name, cursor)}

    return _stream(request, _all_terminal(request, [experiment_id]), step)


@router.get("/api/v1/experiments/{experiment_id}/metrics-stream/trials-snapshot")
def trials_snapshot_stream(
    request: Request, experiment_id: int, p: Principal = Depends(authenticate)
) -> StreamingResponse:
    """Every trial's value of a metric at ``batches_processed`` (within ``batches_margin``, at
    most 100) steps, as reported (upstream's ``TrialsSnapshot``)."""
    group, name = _experiment_metric(request, p, experiment_id)
    at = int_param(_param(request, "batches_processed"), "batchesProcessed", 0) or 0
    margin = int_param(_param(request, "batches_margin"), "batchesMargin", 0) or 0
    if not 0 <= margin <= 100:
        raise APIError(400, f"batchesMargin: must be between 0 and 100, got {margin}")
    low, high = max(at - margin, 0), at + margin
    cursor = series.Cursor()

    def step() -> dict[str, Any]:
        args = (experiment_id, group, name, low, high, cursor)
        return {"trials": _read(request, series.new_snapshot, *args)}

    return _stream(request, _all_terminal(request, [experiment_id]), step)


@router.get("/api/v1/experiments/{experiment_id}/metrics-stream/trials-sample")
def trials_sample_stream(
    request: Request, experiment_id: int, p: Principal = Depends(authenticate)
) -> StreamingResponse:
    """A metric's series for the experiment's top ``max_trials`` trials (upstream's
    ``TrialsSample``): a trial's hyperparameters come with the line that promotes it, its points
    only once each; trials that drop out of the top are listed as demoted."""
    group, name = _experiment_metric(request, p, experiment_id)
    max_trials = _count(request, "max_trials", 25)
    max_points = _count(request, "max_datapoints", 1000)
    start = _count(request, "start_batches", 0)
    end = _count(request, "end_batches", 2**31 - 1)
    with master_of(request).db.read() as session:
        exp = session.get(Experiment, experiment_id)
        if exp is None:
            raise APIError(404, f"experiment {experiment_id} not found")
        series.top_trials(session, exp, max_trials)  # 400 now for a single-trial experiment
    last: dict[int, int] = {}  # trial id -> the last step sent (-1: none yet)

    def sample(session: Any) -> dict[str, Any]:
        exp = session.get(Experiment, experiment_id)
        top = series.top_trials(session, exp, max_trials) if exp is not None else []
        promoted = [t for t in top if t not in last]
        hparams = dict(
            session.execute(select(Run.id, Run.hparams).where(Run.id.in_(promoted))).all()
        )
        trials = []
        for trial_id in top:
            since = max(last.get(trial_id, -1) + 1, start)
            data = series.series(session, trial_id, group, [name], max_points, since, end)
            last[trial_id] = data[-1]["batches"] if data else last.get(trial_id, -1)
            trials.append(
                {
                    "trialId": trial_id,
                    "hparams": (hparams.get(trial_id) or {}) if trial_id in promoted else None,
                    "data": data,
                }
            )
        demoted = [t for t in last if t not in top]
        for trial_id in demoted:
            del last[trial_id]
        return {"trials": trials, "promotedTrials": promoted, "demotedTrials": demoted}

    return _stream(request, _all_terminal(request, [experiment_id]), lambda: _read(request, sample))


@router.get("/api/v1/projects/{project_id}/experiments/metric-ranges")
def project_metric_ranges(
    request: Request, project_id: int, p: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """Min and max of each numeric summary statistic (``validation.loss.min``, ...) over the best
    trials of the project's experiments, and of their searcher metric values (upstream's
    ``GetProjectNumericMetricsRange``)."""
    require_project(request, p, project_id, P.VIEW_PROJECT)
    with master_of(request).db.read() as session:
        find_project(session, project_id)
        return {"ranges": metric_ranges(session, project_id)}
