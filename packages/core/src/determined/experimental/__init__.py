"""The Python SDK: upstream's ``determined.experimental`` and its ``client`` module.

``from determined.experimental import client`` gives module-level functions on a default session
(``client.login``, ``client.create_experiment``, ``client.get_checkpoint``, ...);
:class:`Determined` offers the same per master. Objects (:class:`Experiment`, :class:`Trial`,
:class:`Checkpoint`, :class:`Model`, :class:`ModelVersion`, :class:`User`) wrap the master's REST
API. Errors are ``determined.client``'s typed ones (``NotFoundError``, ``UnauthenticatedError``,
``APIError`` with the master's message), also importable under upstream's names from
``determined.common.api.errors``. Nothing here imports a framework or a web server.
"""

from __future__ import annotations

from determined.experimental import checkpoint, client, metrics, model
from determined.experimental._checkpoint import (
    Checkpoint,
    CheckpointSortBy,
    CheckpointState,
    DownloadMode,
)
from determined.experimental._determined import Determined
from determined.experimental._experiment import (
    Experiment,
    ExperimentOrderBy,
    ExperimentSortBy,
    ExperimentState,
)
from determined.experimental._metrics import TrainingMetrics, TrialMetrics, ValidationMetrics
from determined.experimental._model import Model, ModelOrderBy, ModelSortBy, ModelVersion
from determined.experimental._native import Mode, NativeContext, create, init
from determined.experimental._project import Project
from determined.experimental._trial import LogLevel, Trial, TrialOrderBy, TrialSortBy, TrialState
from determined.experimental._user import User
from determined.experimental._util import OrderBy
from determined.experimental._workspace import ResourcePool, Workspace

ExperimentReference = Experiment
"""Deprecated name of :class:`Experiment`."""
TrialReference = Trial
"""Deprecated name of :class:`Trial`."""

__all__ = [
    "Checkpoint",
    "CheckpointSortBy",
    "CheckpointState",
    "Determined",
    "DownloadMode",
    "Experiment",
    "ExperimentOrderBy",
    "ExperimentReference",
    "ExperimentSortBy",
    "ExperimentState",
    "LogLevel",
    "Mode",
    "Model",
    "ModelOrderBy",
    "ModelSortBy",
    "ModelVersion",
    "NativeContext",
    "OrderBy",
    "Project",
    "ResourcePool",
    "TrainingMetrics",
    "Trial",
    "TrialMetrics",
    "TrialOrderBy",
    "TrialReference",
    "TrialSortBy",
    "TrialState",
    "User",
    "ValidationMetrics",
    "Workspace",
    "checkpoint",
    "client",
    "create",
    "init",
    "metrics",
    "model",
]
