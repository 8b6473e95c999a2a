"""Run routes of upstream's runs API: ``POST /api/v1/runs`` (``SearchRuns``, the runs table of the
web UI and ``bindings.post_SearchRuns``). The filter language lives in ``_core/_run_search``."""

from __future__ import annotations

from typing import Any

from fastapi import Depends, Request

from determined.master._api._access import P, visible
from determined.master._api._deps import Principal, authenticate, int_param, json_body, master_of
from determined.master._api._json_route import api_router
from determined.master._core._projects import project_names
from determined.master._core._run_search import checkpoint_totals, search_runs
from determined.master._wire import APIError, clean_float, get, pagination, state, ts
from determined.master.db import Experiment, Run

router = api_router(tags=["Runs"])


@router.post("/api/v1/runs")
def post_search_runs(
    request: Request,
    body: dict[str, Any] = Depends(json_body),
    p: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """Runs the caller may see that pass ``filter``, sorted by ``sort``, a page of them."""
    offset = int_param(get(body, "offset"), "offset", 0) or 0
    limit = int_param(get(body, "limit"), "limit", 0) or 0
    if offset < 0:
        raise APIError(400, "offset: must not be negative")
    if limit < 0:
        raise APIError(400, "limit: must not be negative")
    project_id = int_param(get(body, "project_id"), "projectId")
    text = {}
    for key in ("filter", "sort"):
        value = body.get(key)
        if value is not None and not isinstance(value, str):
            raise APIError(400, f"{key}: must be a string")
        text[key] = value
    workspaces = visible(request, p, P.VIEW_EXPERIMENT_METADATA)
    with master_of(request).db.read() as session:
        rows, total = search_runs(
            session,
            workspaces,
            project_id=project_id,
            filter_text=text["filter"],
            sort_text=text["sort"],
            offset=offset,
            limit=limit,
        )
        totals = checkpoint_totals(session, [run.id for run, _ in rows])
        projects: dict[int, dict[str, Any]] = {}
        runs = []
        for run, exp in rows:
            if exp.project_id not in projects:
                projects[exp.project_id] = project_names(session, exp.project_id)
            runs.append(_flat_run(run, exp, projects[exp.project_id], totals))
    return {"runs": runs, "pagination": pagination(offset, limit, len(runs), total)}


def _flat_run(
    run: Run,
    exp: Experiment,
    project: dict[str, Any],
    totals: dict[int, tuple[int, int]],
) -> dict[str, Any]:
    """Upstream's ``runv1.FlatRun``."""
    count, size = totals.get(run.id, (0, 0))
    searcher = exp.config.get("searcher") or {}
    start, end = run.start_time, run.end_time
    return {
        "id": run.id,
        "startTime": ts(start),
        "endTime": ts(end),
        "state": state(run.state),
        "labels": list(exp.labels or []),
        "checkpointSize": str(size),
        "checkpointCount": count,
        "searcherMetricValue": clean_float(run.searcher_metric_value),
        "externalRunId": run.external_trial_id,
        "hyperparameters": run.hparams or {},
        "summaryMetrics": _summary(run.summary_metrics or {}),
        "userId": exp.owner_id,
        "duration": int((end - start).total_seconds()) if start and end else None,
        "projectId": exp.project_id,
        "projectName": project["projectName"],
        "workspaceId": project["workspaceId"],
        "workspaceName": project["workspaceName"],
        "parentArchived": project["parentArchived"],
        "experiment": {
            "id": exp.id,
            "searcherType": searcher.get("name") or "",
            "searcherMetric": searcher.get("metric") or "",
            "forkedFrom": exp.parent_id,
            "externalExperimentId": exp.external_experiment_id,
            "resourcePool": (exp.config.get("resources") or {}).get("resource_pool") or "default",
            "progress": exp.progress or 0.0,
            "description": exp.config.get("description") or "",
            "name": exp.config.get("name") or "",
            "unmanaged": bool(exp.unmanaged),
            "isMultitrial": searcher.get("name") not in (None, "single", "custom"),
            "pachydermIntegration": None,
        },
        "metadata": run.metadata_ or {},
        "archived": bool(run.archived),
        "logPolicyMatched": run.log_policy_matched,
    }


def _summary(summary: dict[str, Any]) -> dict[str, Any]:
    """Summary metrics under upstream's group keys (``avg_metrics``, ``validation_metrics``)."""
    names = {"training": "avg_metrics", "validation": "validation_metrics"}
    return {
        names.get(group, group): {
            name: {k: clean_float(v) for k, v in entry.items()} for name, entry in metrics.items()
        }
        for group, metrics in summary.items()
        if isinstance(metrics, dict)
    }
