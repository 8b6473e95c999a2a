"""Route-side RBAC: which workspace an object lives in, and the one guard every route calls.

Upstream's semantics: an object the caller may not *see* answers 404 ("experiment 7 not found", as if
it did not exist), an object it may see but not change answers 403 naming the missing permission, and
nothing changes. The workspace of an experiment is its project's; a trial's and a checkpoint's are
their experiment's; a model's is ``models.workspace_id``; a task's (command, notebook, TensorBoard,
shell) is ``ntsc_tasks.workspace_id``. A trial's allocation token always passes on its own trial and
experiment (the trial must never be locked out of itself); elsewhere it acts with its owner's roles.

Routes use the dependencies (``dependencies=[on_experiment(P.UPDATE_EXPERIMENT)]``) or the
``require_*`` functions; listings filter with :func:`visible` and the clauses of
``determined.master.db`` (``experiments_visible`` ...).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from fastapi import Depends, Request
from sqlalchemy import select
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from determined.master._api._deps import Principal, authenticate, authz_of, master_of
from determined.master._api._json_route import PENDING_CHECKS, RUNS_CHECKS
from determined.master._core._authz import Permission
from determined.master._wire import APIError, numeric_id
from determined.master.db import (
    Allocation,
    Checkpoint,
    Experiment,
    Model,
    ModelVersion,
    NtscTask,
    Run,
)

P = Permission

_VIEW_OF: dict[Permission, Permission] = {
    P.VIEW_EXPERIMENT_METADATA: P.VIEW_EXPERIMENT_METADATA,
    P.VIEW_EXPERIMENT_ARTIFACTS: P.VIEW_EXPERIMENT_METADATA,
    P.UPDATE_EXPERIMENT: P.VIEW_EXPERIMENT_METADATA,
    P.UPDATE_EXPERIMENT_METADATA: P.VIEW_EXPERIMENT_METADATA,
    P.DELETE_EXPERIMENT: P.VIEW_EXPERIMENT_METADATA,
    P.CREATE_EXPERIMENT: P.VIEW_PROJECT,
    P.VIEW_MODEL_REGISTRY: P.VIEW_MODEL_REGISTRY,
    P.EDIT_MODEL_REGISTRY: P.VIEW_MODEL_REGISTRY,
    P.CREATE_MODEL_REGISTRY: P.VIEW_MODEL_REGISTRY,
    P.DELETE_MODEL_REGISTRY: P.VIEW_MODEL_REGISTRY,
    P.VIEW_NSC: P.VIEW_NSC,
    P.CREATE_NSC: P.VIEW_NSC,
    P.UPDATE_NSC: P.VIEW_NSC,
}
"""The permission that decides whether the caller sees the object at all (404 without it)."""


def _view_of(permission: Permission) -> Permission:
    """:data:`_VIEW_OF`, else by the permission's kind (a model's, a task's, an experiment's)."""
    known = _VIEW_OF.get(permission)
    if known is not None:
        return known
    if "MODEL" in permission.name:
        return P.VIEW_MODEL_REGISTRY
    if "NSC" in permission.name:
        return P.VIEW_NSC
    if "EXPERIMENT" in permission.name:
        return P.VIEW_EXPERIMENT_METADATA
    return permission


def own_trial(p: Principal) -> tuple[int | None, int | None]:
    """(trial id, experiment id) of the caller's allocation token, resolved with the token
    (``_deps._resolve``); (None, None) for users."""
    return p.trial_id, p.experiment_id


def guard(request: Request, p: Principal, permission: Permission, ws: int, what: str) -> None:
    """404 ``<what> not found`` unless the caller sees workspace ``ws``'s objects of this kind,
    403 naming ``permission`` unless it holds it there."""
    authz = authz_of(request)
    if authz.can(p, permission, ws):
        return
    view = _view_of(permission)
    if view is not permission and authz.can(p, view, ws):
        authz.check(p, permission, ws)
    raise APIError(404, f"{what} not found")


def visible(request: Request, p: Principal, permission: Permission) -> set[int] | None:
    """Workspace ids a listing may show (None: every workspace)."""
    return authz_of(request).visible_workspace_ids(p, permission)


def experiment_workspace(request: Request, session: Session, exp_id: int) -> int:
    """The workspace of an experiment; 404 when it does not exist (or is deleted).

    Reads the two columns it needs, not the experiment (its config and original YAML are the
    largest values of the row, decoded for nothing on every guarded request)."""
    row = session.execute(
        select(Experiment.state, Experiment.project_id).where(Experiment.id == exp_id)
    ).first()
    ws = _live_workspace(request, row)
    if ws is None:
        raise APIError(404, f"experiment {exp_id} not found")
    return ws


def _live_workspace(request: Request, row: Any) -> int | None:
    """The workspace of an experiment's ``(state, project_id)`` row; None when there is no row,
    the experiment is deleted or its project unknown."""
    if row is None or row[0] == "DELETED":
        return None
    return authz_of(request).workspace_of_project(row[1])


def require_experiment(
    request: Request, p: Principal, exp_id: int, permission: Permission, *, own_ok: bool = True
) -> None:
    """The guard for an experiment (a trial's token passes on its own experiment if ``own_ok``)."""
    if own_ok and p.allocation_id is not None and own_trial(p)[1] == exp_id:
        return
    with master_of(request).db.read() as session:
        ws = experiment_workspace(request, session, exp_id)
    guard(request, p, permission, ws, f"experiment {exp_id}")


def require_trial(request: Request, p: Principal, trial_id: int, permission: Permission) -> None:
    """The guard for a trial: its experiment's workspace (a trial's token passes on itself)."""
    if p.allocation_id is not None and own_trial(p)[0] == trial_id:
        return
    with master_of(request).db.read() as session:
        row = session.execute(
            select(Experiment.state, Experiment.project_id)
            .join(Run, Run.experiment_id == Experiment.id)
            .where(Run.id == trial_id)
        ).first()
    ws = _live_workspace(request, row)
    if ws is None:
        raise APIError(404, f"trial {trial_id} not found")
    guard(request, p, permission, ws, f"trial {trial_id}")


def checkpoint_experiment(session: Session, uuid: str) -> int | None:
    """The experiment of a checkpoint (its own column, else its trial's); None when unknown."""
    row = session.execute(
        select(Checkpoint.experiment_id, Checkpoint.trial_id).where(Checkpoint.uuid == uuid)
    ).first()
    if row is None:
        return None
    exp_id, trial_id = row
    if exp_id is None and trial_id is not None:
        exp_id = session.scalar(select(Run.experiment_id).where(Run.id == trial_id))
    return exp_id


def checkpoint_workspace(request: Request, session: Session, uuid: str) -> int | None:
    """The workspace of a checkpoint's experiment; None when the checkpoint does not exist."""
    exp_id = checkpoint_experiment(session, uuid)
    if exp_id is None:
        return None
    exp = session.get(Experiment, exp_id)
    if exp is None:
        return None
    return authz_of(request).workspace_of_project(exp.project_id)


def require_checkpoint(request: Request, p: Principal, uuid: str, permission: Permission) -> None:
    """The guard for a checkpoint: its experiment's workspace (a trial's token reads the
    checkpoints of its own experiment, e.g. to resume)."""
    with master_of(request).db.read() as session:
        if p.allocation_id is not None:
            own_exp = own_trial(p)[1]
            if own_exp is not None and checkpoint_experiment(session, uuid) == own_exp:
                return
        ws = checkpoint_workspace(request, session, uuid)
    if ws is None:
        raise APIError(404, f"checkpoint {uuid} not found")
    guard(request, p, permission, ws, f"checkpoint {uuid}")


def model_workspace(session: Session, name: str) -> int | None:
    """The workspace of a model given by name or numeric id; None when there is no such model."""
    ws = session.scalar(select(Model.workspace_id).where(Model.name == name))
    if ws is None and numeric_id(name) is not None:
        ws = session.scalar(select(Model.workspace_id).where(Model.id == numeric_id(name)))
    return ws


def require_model(request: Request, p: Principal, name: str, permission: Permission) -> None:
    """The guard for a registered model (by name or id): ``models.workspace_id``."""
    with master_of(request).db.read() as session:
        ws = model_workspace(session, name)
    if ws is None:
        raise APIError(404, f"model {name!r} not found")
    guard(request, p, permission, ws, f"model {name!r}")


def require_task(request: Request, p: Principal, task_id: str, permission: Permission) -> None:
    """The guard for a command/notebook/TensorBoard/shell; a trial's task id goes to its trial
    (VIEW_NSC → VIEW_EXPERIMENT_METADATA, UPDATE_NSC → UPDATE_EXPERIMENT). Unknown ids pass
    through, for the route's own 404."""
    from determined.master.db import Task

    with master_of(request).db.read() as session:
        row = session.get(NtscTask, task_id)
        ws = int(getattr(row, "workspace_id", None) or 1) if row is not None else None
        trial_id = None
        if row is None:
            trial_id = session.scalar(select(Task.trial_id).where(Task.task_id == task_id))
    if ws is not None:
        guard(request, p, permission, ws, f"task {task_id}")
    elif trial_id is not None:
        trial_perm = (
            P.UPDATE_EXPERIMENT if permission is P.UPDATE_NSC else P.VIEW_EXPERIMENT_METADATA
        )
        require_trial(request, p, trial_id, trial_perm)


def require_workspace(request: Request, p: Principal, ws: int, permission: Permission) -> None:
    """The guard for creating something in workspace ``ws`` (404 when the caller cannot see it)."""
    authz = authz_of(request)
    if authz.can(p, permission, ws):
        return
    if authz.can(p, P.VIEW_WORKSPACE, ws):
        authz.check(p, permission, ws)
    raise APIError(404, f"workspace {ws} not found")


def require_project(
    request: Request, p: Principal, project_id: int, permission: Permission
) -> None:
    """The guard for creating something in a project: its workspace (404 for an unknown one)."""
    ws = authz_of(request).workspace_of_project(project_id)
    if ws is None:
        raise APIError(404, f"project {project_id} not found")
    authz = authz_of(request)
    if authz.can(p, permission, ws):
        return
    if authz.can(p, P.VIEW_PROJECT, ws):
        authz.check(p, permission, ws)
    raise APIError(404, f"project {project_id} not found")


# --- dependencies: one line per route --------------------------------------------------------


async def _check(request: Request, check: Callable[..., None], *args: Any) -> None:
    """Run ``check(*args)`` (it may read the database) where it costs no thread hop of its own:
    inside the endpoint when the route's endpoint runs pending checks (every ``api_router``
    route without a response model, see ``_json_route``), else now on a worker thread."""
    if getattr(request.scope.get("endpoint"), RUNS_CHECKS, False):
        request.scope.setdefault(PENDING_CHECKS, []).append(functools.partial(check, *args))
    else:
        await run_in_threadpool(check, *args)


def on_experiment(permission: Permission) -> Any:
    """``Depends`` guarding the route's ``experiment_id`` path parameter."""

    async def dep(
        request: Request, experiment_id: int, p: Principal = Depends(authenticate)
    ) -> None:
        await _check(request, require_experiment, request, p, experiment_id, permission)

    return Depends(dep)


def on_trial(permission: Permission) -> Any:
    """``Depends`` guarding the route's ``trial_id`` path parameter."""

    async def dep(request: Request, trial_id: int, p: Principal = Depends(authenticate)) -> None:
        await _check(request, require_trial, request, p, trial_id, permission)

    return Depends(dep)


def on_trial_async(permission: Permission) -> Any:
    """:func:`on_trial` for hot ``async`` routes: a trial's token on its own trial costs no thread
    hop (the principal carries its trial)."""

    async def dep(request: Request, trial_id: int, p: Principal = Depends(authenticate)) -> None:
        if p.allocation_id is not None and p.trial_id == trial_id:
            return
        await _check(request, require_trial, request, p, trial_id, permission)

    return Depends(dep)


def on_checkpoint(permission: Permission) -> Any:
    """``Depends`` guarding the route's ``uuid`` path parameter."""

    async def dep(request: Request, uuid: str, p: Principal = Depends(authenticate)) -> None:
        await _check(request, require_checkpoint, request, p, uuid, permission)

    return Depends(dep)


def on_checkpoint_uuid(permission: Permission) -> Any:
    """``Depends`` guarding the route's ``checkpoint_uuid`` path parameter."""

    async def dep(
        request: Request, checkpoint_uuid: str, p: Principal = Depends(authenticate)
    ) -> None:
        await _check(request, require_checkpoint, request, p, checkpoint_uuid, permission)

    return Depends(dep)


def on_model(permission: Permission) -> Any:
    """``Depends`` guarding the route's ``model_name`` path parameter (a name or an id)."""

    async def dep(request: Request, model_name: str, p: Principal = Depends(authenticate)) -> None:
        await _check(request, require_model, request, p, model_name, permission)

    return Depends(dep)


def on_task(permission: Permission, param: str = "task_id") -> Any:
    """``Depends`` guarding the task id in path parameter ``param``."""

    async def dep(request: Request, p: Principal = Depends(authenticate)) -> None:
        await _check(request, require_task, request, p, str(request.path_params[param]), permission)

    return Depends(dep)


def experiment_ids_visible(
    request: Request, p: Principal, session: Session, ids: list[int]
) -> None:
    """404 for the first of ``ids`` the caller may not see (for routes taking id lists)."""
    for exp_id in ids:
        ws = experiment_workspace(request, session, exp_id)
        guard(request, p, P.VIEW_EXPERIMENT_METADATA, ws, f"experiment {exp_id}")


def model_version_workspace(session: Session, version_id: int) -> int | None:
    """The workspace of a model version's model."""
    return session.scalar(
        select(Model.workspace_id)
        .join(ModelVersion, ModelVersion.model_id == Model.id)
        .where(ModelVersion.id == version_id)
    )


def acting_user(
    request: Request,
    p: Principal,
    *,
    experiment_id: int | None = None,
    task_id: str | None = None,
    model: str | None = None,
) -> Any:
    """The requester to hand a service whose own rule is "the owner or an admin" (deleting an
    experiment or a model, killing a task): with RBAC on, a WorkspaceAdmin of the object's
    workspace (UPDATE_WORKSPACE there) counts as an admin; an Editor still acts only on its own
    (every user is an Editor of the default workspace, so "any Editor" would be everybody)."""
    authz = authz_of(request)
    if not authz.enabled or p.user.admin:
        return p.user
    ws: int | None = None
    with master_of(request).db.read() as session:
        if experiment_id is not None:
            ws = experiment_workspace(request, session, experiment_id)
        elif task_id is not None:
            row = session.get(NtscTask, task_id)
            ws = int(getattr(row, "workspace_id", None) or 1) if row is not None else None
        elif model is not None:
            ws = model_workspace(session, model)
    if ws is None or not authz.can(p, P.UPDATE_WORKSPACE, ws):
        return p.user
    from types import SimpleNamespace

    return SimpleNamespace(id=p.user.id, username=p.user.username, admin=True)


def on_run(permission: Permission) -> Any:
    """``Depends`` guarding the route's ``run_id`` path parameter (a run is a trial)."""

    async def dep(request: Request, run_id: int, p: Principal = Depends(authenticate)) -> None:
        await _check(request, require_trial, request, p, run_id, permission)

    return Depends(dep)


def visible_trial_ids(request: Request, p: Principal, trial_ids: set[int]) -> set[int]:
    """The ids among ``trial_ids`` whose experiments the caller may see."""
    from determined.master.db._visibility import runs_visible

    workspaces = visible(request, p, P.VIEW_EXPERIMENT_METADATA)
    if workspaces is None or not trial_ids:
        return set(trial_ids)
    with master_of(request).db.read() as session:
        return set(
            session.scalars(select(Run.id).where(Run.id.in_(trial_ids), runs_visible(workspaces)))
        )


def require_allocation(
    request: Request, p: Principal, allocation_id: str, permission: Permission
) -> None:
    """The guard for an allocation: the caller's own allocation passes; else its trial (with
    ``permission``, an experiment permission) or its task (UPDATE_NSC / VIEW_NSC)."""
    if p.allocation_id is not None and p.allocation_id == allocation_id:
        return
    with master_of(request).db.read() as session:
        row = session.execute(
            select(Allocation.trial_id, Allocation.task_id).where(
                Allocation.allocation_id == allocation_id
            )
        ).first()
    if row is None:
        return  # the route answers its own 404
    trial_id, task_id = row
    if trial_id is not None:
        require_trial(request, p, trial_id, permission)
    else:
        nsc = P.VIEW_NSC if permission is P.VIEW_EXPERIMENT_METADATA else P.UPDATE_NSC
        require_task(request, p, task_id, nsc)


def on_allocation(permission: Permission = P.UPDATE_EXPERIMENT) -> Any:
    """``Depends`` guarding the route's ``allocation_id`` (own allocation: no database hit)."""

    async def dep(
        request: Request, allocation_id: str, p: Principal = Depends(authenticate)
    ) -> None:
        if p.allocation_id == allocation_id:
            return
        await _check(request, require_allocation, request, p, allocation_id, permission)

    return Depends(dep)


def require_log_tasks(request: Request, p: Principal, task_ids: set[str]) -> None:
    """The guard for shipping log lines to tasks: the caller's own allocation's task passes,
    others need UPDATE_NSC (a trial's task: UPDATE_EXPERIMENT on its experiment)."""
    own_task = p.task_id if p.allocation_id is not None else None
    for task_id in task_ids:
        if task_id != own_task:
            require_task(request, p, task_id, P.UPDATE_NSC)


def task_workspace(request: Request, p: Principal, body: dict[str, Any]) -> int:
    """The workspace a new command/notebook/TensorBoard/shell goes to (``workspaceId``, default
    the default workspace); 404/403 unless the caller holds CREATE_NSC there, and 404 when it does
    not exist or is archived (as upstream: an archived workspace takes no new tasks)."""
    from determined.master._api._deps import int_param
    from determined.master._wire import get
    from determined.master.db import Workspace

    ws = int_param(get(body, "workspace_id"), "workspaceId", 1) or 1
    with master_of(request).db.read() as session:
        row = session.get(Workspace, ws)
        usable = row is not None and not row.archived
    if not usable:
        raise APIError(404, f"workspaceId: workspace {ws} not found")
    require_workspace(request, p, ws, P.CREATE_NSC)
    return ws


def visible_tasks(request: Request, p: Principal, views: list[Any]) -> list[Any]:
    """The task views (``TaskView``) in workspaces where the caller holds VIEW_NSC."""
    workspaces = visible(request, p, P.VIEW_NSC)
    if workspaces is None:
        return list(views)
    return [v for v in views if getattr(v, "workspace_id", 1) in workspaces]


def on_cluster(permission: Permission) -> Any:
    """``Depends`` for a cluster-wide permission (e.g. VIEW_CLUSTER_USAGE): 403 naming it."""

    async def dep(request: Request, p: Principal = Depends(authenticate)) -> None:
        await _check(request, authz_of(request).check, p, permission, None)

    return Depends(dep)


def visible_task_ids(request: Request, p: Principal, task_ids: set[str]) -> set[str]:
    """The ids among ``task_ids`` (trials' tasks and commands/notebooks/...) the caller may see."""
    from determined.master.db import Task
    from determined.master.db._visibility import runs_visible, tasks_visible

    exp_ws = visible(request, p, P.VIEW_EXPERIMENT_METADATA)
    nsc_ws = visible(request, p, P.VIEW_NSC)
    if (exp_ws is None and nsc_ws is None) or not task_ids:
        return set(task_ids)
    ids = list(task_ids)
    with master_of(request).db.read() as session:
        shown = set(
            session.scalars(
                select(NtscTask.task_id).where(NtscTask.task_id.in_(ids), tasks_visible(nsc_ws))
            )
        )
        shown |= set(
            session.scalars(
                select(Task.task_id)
                .join(Run, Run.id == Task.trial_id)
                .where(Task.task_id.in_(ids), runs_visible(exp_ws))
            )
        )
    return shown


def mask_jobs(request: Request, p: Principal, jobs: list[Any]) -> list[Any]:
    """The job queue as the caller may see it: jobs of experiments and tasks it cannot see keep
    their place but lose their name, entity and user (upstream's ``LimitedJob``)."""
    import dataclasses

    exp_ws = visible(request, p, P.VIEW_EXPERIMENT_METADATA)
    nsc_ws = visible(request, p, P.VIEW_NSC)
    if exp_ws is None and nsc_ws is None:
        return jobs
    from determined.master.db._visibility import experiments_visible, tasks_visible

    exp_ids = [int(j.entity_id) for j in jobs if j.type == "TYPE_EXPERIMENT" and j.entity_id]
    task_ids = [j.entity_id for j in jobs if j.type != "TYPE_EXPERIMENT" and j.entity_id]
    with master_of(request).db.read() as session:
        shown_exps = {
            str(i)
            for i in session.scalars(
                select(Experiment.id).where(Experiment.id.in_(exp_ids), experiments_visible(exp_ws))
            )
        }
        shown_tasks = set(
            session.scalars(
                select(NtscTask.task_id).where(
                    NtscTask.task_id.in_(task_ids), tasks_visible(nsc_ws)
                )
            )
        )
    out = []
    for job in jobs:
        if job.entity_id in shown_exps or job.entity_id in shown_tasks:
            out.append(job)
        else:
            out.append(dataclasses.replace(job, name="", entity_id="", username="", user_id=None))
    return out
