"""Upstream's bulk experiment actions: ``POST /api/v1/projects/{projectId}/experiments/{action}`` for
activate, pause, cancel, kill, archive and unarchive, on listed ``experimentIds`` or on the experiments
matching ``filters`` (upstream's ``v1BulkExperimentFilters``); one ``{id, error}`` result each."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import Depends, Request
from sqlalchemy import select

from determined.master._api._access import P, require_experiment
from determined.master._api._deps import (
    Principal,
    authenticate,
    experiments_of,
    int_param,
    json_body,
    master_of,
)
from determined.master._api._json_route import api_router
from determined.master._wire import TERMINAL_STATES, APIError, get, unstate
from determined.master.db import Experiment, Project

router = api_router(tags=["Experiments"])

# action -> (permission, states a filter selects: upstream adds them to the filter, None = any)
ACTIONS: dict[str, tuple[Any, tuple[str, ...] | None]] = {
    "activate": (P.UPDATE_EXPERIMENT, ("PAUSED",)),
    "pause": (P.UPDATE_EXPERIMENT, ("ACTIVE",)),
    "cancel": (P.UPDATE_EXPERIMENT, None),
    "kill": (P.UPDATE_EXPERIMENT, None),
    "archive": (P.UPDATE_EXPERIMENT_METADATA, TERMINAL_STATES),
    "unarchive": (P.UPDATE_EXPERIMENT_METADATA, TERMINAL_STATES),
}


def _ids(body: dict[str, Any]) -> list[int]:
    raw = get(body, "experiment_ids") or []
    if not isinstance(raw, list):
        raise APIError(400, "experimentIds: must be a list of experiment ids")
    return [i for i in (int_param(x, "experimentIds") for x in raw) if i is not None]


def _filtered(request: Request, project_id: int, action: str, filters: Any) -> list[int]:
    """Ids of the experiments ``filters`` selects (in ``project_id`` when it is positive)."""
    if not isinstance(filters, dict):
        raise APIError(400, "filters: must be an object (v1BulkExperimentFilters)")
    query = select(Experiment).where(Experiment.unmanaged.is_not(True))
    project = int_param(get(filters, "project_id"), "filters.projectId") or project_id
    if project > 0:
        query = query.where(Experiment.project_id == project)
    states = ACTIONS[action][1]
    wanted = [unstate(str(s)) for s in (get(filters, "states") or [])]
    excluded = {int(i) for i in (get(filters, "excluded_experiment_ids") or [])}
    users = {int(i) for i in (get(filters, "user_ids") or [])}
    labels = {str(label) for label in (get(filters, "labels") or [])}
    name = str(get(filters, "name") or "").lower()
    description = str(get(filters, "description") or "").lower()
    archived = get(filters, "archived")
    with master_of(request).db.read() as session:
        if project > 0 and session.get(Project, project) is None:
            raise APIError(404, f"project {project} not found")
        rows = list(session.scalars(query.order_by(Experiment.id)))
    chosen = []
    for row in rows:
        if states is not None and row.state not in states and action not in ("cancel", "kill"):
            continue
        if action in ("cancel", "kill") and row.state in TERMINAL_STATES:
            continue
        if (wanted and row.state not in wanted) or row.id in excluded:
            continue
        if users and row.owner_id not in users:
            continue
        if labels and not labels & set(row.labels or []):
            continue
        if name and name not in str(row.config.get("name") or "").lower():
            continue
        if description and description not in str(row.config.get("description") or "").lower():
            continue
        if archived is not None and bool(row.archived) != bool(archived):
            continue
        chosen.append(row.id)
    return chosen


def _bulk(
    request: Request, p: Principal, project_id: int, body: dict[str, Any], action: str
) -> dict[str, Any]:
    permission = ACTIONS[action][0]
    filters = get(body, "filters")
    by_filter = filters is not None
    ids = _filtered(request, project_id, action, filters) if by_filter else _ids(body)
    results = []
    for exp_id in ids:
        try:
            require_experiment(request, p, exp_id, permission, own_ok=False)
        except APIError as e:
            if not by_filter:  # what a filter matches is only what the caller may change
                results.append({"id": exp_id, "error": e.message})
            continue
        try:
            experiments_of(request).act(exp_id, action)
        except APIError as e:
            results.append({"id": exp_id, "error": e.message})
            continue
        results.append({"id": exp_id, "error": ""})
    return {"results": results}


def _route(action: str) -> Callable[..., dict[str, Any]]:
    def handler(
        request: Request,
        project_id: int,
        body: dict[str, Any] = Depends(json_body),
        p: Principal = Depends(authenticate),
    ) -> dict[str, Any]:
        return _bulk(request, p, project_id, body, action)

    handler.__name__ = f"{action}_experiments"
    handler.__doc__ = (
        f"{action.capitalize()} the listed experiments (``experimentIds``) or those ``filters`` "
        "selects; one ``{id, error}`` result each."
    )
    return handler


for _action in ACTIONS:
    router.post(f"/api/v1/projects/{{project_id}}/experiments/{_action}")(_route(_action))
