"""RBAC filters of listings: SQL conditions that keep only rows in the caller's visible workspaces.

Each takes the set of workspace ids a caller may see (``Authz.visible_workspace_ids``) or ``None``
(every workspace: admins, cluster-wide roles, RBAC off) and answers a condition to put in a
``where``. One definition per kind of row, shared by the REST API and the web UI, so a listing,
a search and a download cannot disagree about what a user sees.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from sqlalchemy import false, select, true

from determined.master.db._models import Checkpoint, Experiment, Model, ModelVersion, Run
from determined.master.db._task_models import NtscTask
from determined.master.db._team_models import DEFAULT_WORKSPACE_ID, Project


def experiments_visible(workspaces: Collection[int] | None) -> Any:
    """Experiments whose project lies in one of ``workspaces``."""
    if workspaces is None:
        return true()
    if not workspaces:
        return false()
    projects = select(Project.id).where(Project.workspace_id.in_(list(workspaces)))
    return Experiment.project_id.in_(projects)


def _visible_experiment_ids(workspaces: Collection[int]) -> Any:
    return select(Experiment.id).where(experiments_visible(workspaces))


def runs_visible(workspaces: Collection[int] | None) -> Any:
    """Trials (runs) of visible experiments."""
    if workspaces is None:
        return true()
    if not workspaces:
        return false()
    return Run.experiment_id.in_(_visible_experiment_ids(workspaces))


def checkpoints_visible(workspaces: Collection[int] | None) -> Any:
    """Checkpoints of visible experiments (by the checkpoint's experiment, else its trial's)."""
    if workspaces is None:
        return true()
    if not workspaces:
        return false()
    exp_ids = _visible_experiment_ids(workspaces)
    run_ids = select(Run.id).where(Run.experiment_id.in_(exp_ids))
    return Checkpoint.experiment_id.in_(exp_ids) | (
        Checkpoint.experiment_id.is_(None) & Checkpoint.trial_id.in_(run_ids)
    )


def models_visible(workspaces: Collection[int] | None) -> Any:
    """Registered models of visible workspaces."""
    if workspaces is None:
        return true()
    if not workspaces:
        return false()
    return Model.workspace_id.in_(list(workspaces))


def model_versions_visible(workspaces: Collection[int] | None) -> Any:
    """Versions of visible models."""
    if workspaces is None:
        return true()
    if not workspaces:
        return false()
    return ModelVersion.model_id.in_(select(Model.id).where(models_visible(workspaces)))


def tasks_visible(workspaces: Collection[int] | None) -> Any:
    """Commands, notebooks, TensorBoards and shells of visible workspaces."""
    if workspaces is None:
        return true()
    if not workspaces:
        return false()
    column = getattr(NtscTask, "workspace_id", None)
    if column is None:
        return true() if DEFAULT_WORKSPACE_ID in workspaces else false()
    return column.in_(list(workspaces))


def task_workspace(row: Any) -> int:
    """The workspace of an ``ntsc_tasks`` row (the default workspace for rows without one)."""
    return int(getattr(row, "workspace_id", None) or DEFAULT_WORKSPACE_ID)
