"""An experiment's lifecycle actions: activate, pause, cancel, kill, archive, unarchive.

Each is one call of the experiments service; bulk forms over a project are in _bulk_experiments.
"""

from __future__ import annotations

from typing import Any

from fastapi import Depends, Request

from determined.master._api._access import P, on_experiment
from determined.master._api._deps import Principal, authenticate, experiments_of
from determined.master._api._json_route import api_router

router = api_router(tags=["Experiments"])


def _action(request: Request, experiment_id: int, action: str) -> dict[str, Any]:
    experiments_of(request).act(experiment_id, action)
    return {}


@router.post(
    "/api/v1/experiments/{experiment_id}/activate",
    dependencies=[on_experiment(P.UPDATE_EXPERIMENT)],
)
def activate(
    request: Request, experiment_id: int, p: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """Activate a paused experiment: its trials resume from their latest checkpoints."""
    return _action(request, experiment_id, "activate")


@router.post(
    "/api/v1/experiments/{experiment_id}/pause",
    dependencies=[on_experiment(P.UPDATE_EXPERIMENT)],
)
def pause(
    request: Request, experiment_id: int, p: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """Pause: every running trial gets the preemption signal."""
    return _action(request, experiment_id, "pause")


@router.post(
    "/api/v1/experiments/{experiment_id}/cancel",
    dependencies=[on_experiment(P.UPDATE_EXPERIMENT)],
)
def cancel(
    request: Request, experiment_id: int, p: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """Stop gracefully (preemption signal, then kill after ``preemption_timeout``)."""
    return _action(request, experiment_id, "cancel")


@router.post(
    "/api/v1/experiments/{experiment_id}/kill",
    dependencies=[on_experiment(P.UPDATE_EXPERIMENT)],
)
def kill(
    request: Request, experiment_id: int, p: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """Kill every trial process of the experiment."""
    return _action(request, experiment_id, "kill")


@router.post(
    "/api/v1/experiments/{experiment_id}/archive",
    dependencies=[on_experiment(P.UPDATE_EXPERIMENT_METADATA)],
)
def archive(
    request: Request, experiment_id: int, p: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """Archive a terminal experiment."""
    return _action(request, experiment_id, "archive")


@router.post(
    "/api/v1/experiments/{experiment_id}/unarchive",
    dependencies=[on_experiment(P.UPDATE_EXPERIMENT_METADATA)],
)
def unarchive(
    request: Request, experiment_id: int, p: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """Unarchive a terminal experiment."""
    return _action(request, experiment_id, "unarchive")
