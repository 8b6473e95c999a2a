"""TensorBoard routes (upstream's ``/api/v1/tensorboards``) and deleting an experiment's
TensorBoard files (``DELETE /api/v1/experiments/{id}/tensorboard-files``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import Depends, Request

from determined.master._api._access import (
    P,
    acting_user,
    on_experiment,
    on_task,
    require_experiment,
    require_trial,
    task_workspace,
    visible,
)
from determined.master._api._deps import (
    Principal,
    authenticate,
    json_body,
    master_of,
    tensorboards_of,
)
from determined.master._api._json_route import api_router
from determined.master._api._ntsc_lists import list_tasks
from determined.master._core._context import ContextError, pack_files
from determined.master._core._task_records import ntsc_json
from determined.master._core._tensorboards import TensorboardLaunch, tensorboard_extra
from determined.master._wire import APIError, get
from determined.master.db import Experiment

if TYPE_CHECKING:
    from determined.master._core._tasks import TaskView

router = api_router(tags=["Tensorboards"])


def tensorboard_json(view: TaskView) -> dict[str, Any]:
    """Upstream's ``Tensorboard`` message."""
    return {**ntsc_json(view), **tensorboard_extra(view)}


def _ids(body: dict[str, Any], name: str, label: str) -> tuple[int, ...]:
    value = get(body, name)
    if value is None:
        return ()
    if not isinstance(value, list) or not all(
        isinstance(x, int) and not isinstance(x, bool) for x in value
    ):
        raise APIError(400, f"{label}: must be a list of integers")
    return tuple(dict.fromkeys(value))


@router.post("/api/v1/tensorboards")
def launch_tensorboard(
    request: Request,
    body: dict[str, Any] = Depends(json_body),
    principal: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """Start a TensorBoard over experiments (``experimentIds``), trials (``trialIds``) or the
    experiments matching ``filters``; answers ``tensorboard``, ``config``, ``warnings``."""
    config = get(body, "config") or {}
    if not isinstance(config, dict):
        raise APIError(400, "config: must be an object")
    filters = get(body, "filters")
    if filters is not None and not isinstance(filters, dict):
        raise APIError(400, "filters: must be an object")
    files = get(body, "files") or []
    if not isinstance(files, list):
        raise APIError(400, "files: must be a list of files")
    try:
        context = pack_files(files, master_of(request).config.limits_config().max_context_bytes)
    except ContextError as exc:
        raise APIError(400, f"files: {exc}") from None
    workspace_id = task_workspace(request, principal, body)
    experiment_ids = _ids(body, "experiment_ids", "experimentIds")
    trial_ids = _ids(body, "trial_ids", "trialIds")
    try:
        for exp_id in experiment_ids:
            require_experiment(request, principal, exp_id, P.VIEW_EXPERIMENT_ARTIFACTS)
    except APIError as e:
        raise APIError(e.status, f"experimentIds: {e.message}") from None
    try:
        for trial_id in trial_ids:
            require_trial(request, principal, trial_id, P.VIEW_EXPERIMENT_ARTIFACTS)
    except APIError as e:
        raise APIError(e.status, f"trialIds: {e.message}") from None
    shown = visible(request, principal, P.VIEW_EXPERIMENT_ARTIFACTS)
    launch = TensorboardLaunch(
        experiment_ids=experiment_ids,
        trial_ids=trial_ids,
        filters=filters,
        config=config,
        context=context,
        workspace_id=workspace_id,
        visible_workspaces=frozenset(shown) if shown is not None else None,
    )
    view = tensorboards_of(request).launch(principal.user, launch)
    return {"tensorboard": tensorboard_json(view), "config": view.config, "warnings": []}


@router.get("/api/v1/tensorboards")
def get_tensorboards(
    request: Request, principal: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """TensorBoards (filters ``users``/``userIds``, ``sortBy``, ``orderBy``, ``offset``,
    ``limit``), with ``pagination``."""
    return list_tasks(
        request, principal, "tensorboards", tensorboards_of(request).list, tensorboard_json
    )


@router.get(
    "/api/v1/tensorboards/{tensorboard_id}",
    dependencies=[on_task(P.VIEW_NSC, "tensorboard_id")],
)
def get_tensorboard(
    request: Request, tensorboard_id: str, principal: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """One TensorBoard: ``tensorboard`` and its ``config``."""
    view = tensorboards_of(request).get(tensorboard_id)
    return {"tensorboard": tensorboard_json(view), "config": view.config}


@router.post(
    "/api/v1/tensorboards/{tensorboard_id}/kill",
    dependencies=[on_task(P.UPDATE_NSC, "tensorboard_id")],
)
def kill_tensorboard(
    request: Request, tensorboard_id: str, principal: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """Stop a TensorBoard (its owner or an admin)."""
    view = tensorboards_of(request).kill(
        tensorboard_id, acting_user(request, principal, task_id=tensorboard_id)
    )
    return {"tensorboard": tensorboard_json(view)}


@router.post(
    "/api/v1/tensorboards/{tensorboard_id}/set_priority",
    dependencies=[on_task(P.UPDATE_NSC, "tensorboard_id")],
)
def set_tensorboard_priority(
    request: Request,
    tensorboard_id: str,
    body: dict[str, Any] = Depends(json_body),
    principal: Principal = Depends(authenticate),
) -> dict[str, Any]:
    """Change a TensorBoard's priority (``{"priority": 1..99}``; matters while it waits)."""
    view = tensorboards_of(request).set_priority(
        tensorboard_id,
        body.get("priority"),
        acting_user(request, principal, task_id=tensorboard_id),
    )
    return {"tensorboard": tensorboard_json(view)}


@router.delete(
    "/api/v1/experiments/{experiment_id}/tensorboard-files",
    tags=["Experiments"],
    dependencies=[on_experiment(P.UPDATE_EXPERIMENT)],
)
def delete_tensorboard_files(
    request: Request, experiment_id: int, principal: Principal = Depends(authenticate)
) -> dict[str, Any]:
    """Remove the experiment's TensorBoard files from its checkpoint storage (the experiment's
    owner or an admin)."""
    with master_of(request).db.read() as session:
        exp = session.get(Experiment, experiment_id)
        if exp is None:
            raise APIError(404, f"experiment {experiment_id} not found")
        owner_id = exp.owner_id
    if (
        not acting_user(request, principal, experiment_id=experiment_id).admin
        and principal.user.id != owner_id
    ):
        raise APIError(403, f"only the owner of experiment {experiment_id} or an admin may do this")
    tensorboards_of(request).delete_files(experiment_id)
    return {}
