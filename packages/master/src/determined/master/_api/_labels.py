"""Experiment label routes: add or remove one label, and every label in use (upstream's
``PutExperimentLabel``, ``DeleteExperimentLabel`` and ``GetExperimentLabels``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import Depends, Request

from determined.master._api._access import on_experiment, visible
from determined.master._api._deps import Principal, authenticate, int_param, master_of
from determined.master._api._json_route import api_router
from determined.master._core._authz import Permission
from determined.master._wire import APIError

if TYPE_CHECKING:
    from determined.master._core._labels import ExperimentLabels

router = api_router(tags=["Experiments"])


def labels_of(request: Request) -> ExperimentLabels:
    """The experiment-labels service."""
    return master_of(request).manager.experiment_labels


def _label(label: str) -> str:
    if not label.strip():
        raise APIError(400, "label: must not be empty")
    return label


@router.put("/api/v1/experiments/{experiment_id}/labels/{label}")
def put_label(
    request: Request,
    experiment_id: int,
    label: str,
    _: None = on_experiment(Permission.UPDATE_EXPERIMENT_METADATA),
) -> dict[str, Any]:
    """Put a label on an experiment; the answer holds all its labels."""
    return {"labels": labels_of(request).add(experiment_id, _label(label))}


@router.delete("/api/v1/experiments/{experiment_id}/labels/{label}")
def delete_label(
    request: Request,
    experiment_id: int,
    label: str,
    _: None = on_experiment(Permission.UPDATE_EXPERIMENT_METADATA),
) -> dict[str, Any]:
    """Take a label off an experiment; the answer holds the labels left."""
    return {"labels": labels_of(request).remove(experiment_id, _label(label))}


@router.get("/api/v1/experiment/labels")
def experiment_labels(
    request: Request, principal: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """Every label of the experiments the caller may see (of ``projectId`` when given), most used
    first."""
    project_id = int_param(request.query_params.get("projectId"), "projectId")
    projects = [project_id] if project_id else None
    workspaces = visible(request, principal, Permission.VIEW_EXPERIMENT_METADATA)
    return {"labels": labels_of(request).in_use(projects, workspaces)}
