"""Drive a det master from Python: ``from determined.experimental import client``.

The module-level functions act on a default :class:`Determined` session, created by
:func:`login` or, on first use, from the same credentials the ``det`` CLI uses::

    from determined.experimental import client

    client.login(master="http://localhost:8080", user="determined", password="")
    exp = client.create_experiment(config="const.yaml", model_dir=".")
    print(exp.wait())
    best = exp.list_checkpoints(max_results=1)[0]
    path = best.download()

To talk to several masters, make one :class:`Determined` object per master: it offers the same
functions as methods.

Unlike upstream, calling :func:`login` again replaces the default session (upstream raised
``ValueError`` on a second call, which made notebooks impossible to re-run).
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable
from typing import Concatenate, ParamSpec, TypeVar

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
from determined.experimental._project import Project
from determined.experimental._trial import LogLevel, Trial, TrialOrderBy, TrialSortBy, TrialState
from determined.experimental._user import User
from determined.experimental._util import OrderBy
from determined.experimental._workspace import Workspace

CheckpointOrderBy = OrderBy
"""Deprecated name of :class:`OrderBy`."""

logger = logging.getLogger("determined.client")
P = ParamSpec("P")
R = TypeVar("R")

__all__ = [
    "Checkpoint",
    "CheckpointOrderBy",
    "CheckpointSortBy",
    "CheckpointState",
    "Determined",
    "DownloadMode",
    "Experiment",
    "ExperimentOrderBy",
    "ExperimentSortBy",
    "ExperimentState",
    "LogLevel",
    "Model",
    "ModelOrderBy",
    "ModelSortBy",
    "ModelVersion",
    "OrderBy",
    "Project",
    "TrainingMetrics",
    "Trial",
    "TrialMetrics",
    "TrialOrderBy",
    "TrialSortBy",
    "TrialState",
    "User",
    "ValidationMetrics",
    "Workspace",
    "create_experiment",
    "create_model",
    "create_user",
    "create_workspace",
    "delete_workspace",
    "get_checkpoint",
    "get_experiment",
    "get_model",
    "get_model_by_id",
    "get_model_labels",
    "get_models",
    "get_session_username",
    "get_trial",
    "get_user_by_id",
    "get_user_by_name",
    "get_workspace",
    "iter_trials_metrics",
    "list_experiments",
    "list_models",
    "list_users",
    "list_workspaces",
    "login",
    "logout",
    "stream_trials_metrics",
    "stream_trials_training_metrics",
    "stream_trials_validation_metrics",
    "whoami",
]

_determined: Determined | None = None


def _default() -> Determined:
    global _determined
    if _determined is None:
        _determined = Determined()
    return _determined


def _delegate(method: Callable[Concatenate[Determined, P], R]) -> Callable[P, R]:
    """The module-level twin of a :class:`Determined` method, acting on the default session.

    It keeps the method's name, docstring and signature (less ``self``), so ``help()``, IDEs and
    ``inspect.signature`` show upstream's parameters; type checkers see them through ``P``.
    """
    name = method.__name__

    @functools.wraps(method)
    def on_default(*args: P.args, **kwargs: P.kwargs) -> R:
        bound: Callable[P, R] = getattr(_default(), name)
        return bound(*args, **kwargs)

    signature = inspect.signature(method)
    on_default.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=list(signature.parameters.values())[1:]
    )
    on_default.__qualname__ = name
    on_default.__module__ = __name__
    return on_default


def login(
    master: str | None = None,
    user: str | None = None,
    password: str | None = None,
    cert_path: str | None = None,
    cert_name: str | None = None,
    noverify: bool = False,
) -> None:
    """Set up the default session every function of this module uses.

    Often unnecessary: without it, the first call logs in the way ``det`` does (the cached
    ``det user login`` token, ``$DET_USER``/``$DET_PASS``, or the default ``determined`` user).
    Calling it again replaces the default session. Arguments are those of :class:`Determined`.
    """
    global _determined
    _determined = Determined(master, user, password, cert_path, cert_name, noverify)


def logout() -> None:
    """End the default session on the master and forget it (a no-op without one)."""
    global _determined
    if _determined is None:
        logger.warning("client.logout(): not logged in, nothing to log out of")
        return
    _determined.logout()
    _determined = None


def get_models(
    sort_by: ModelSortBy = ModelSortBy.NAME,
    order_by: OrderBy = OrderBy.ASCENDING,
    name: str = "",
    description: str = "",
) -> list[Model]:
    """Deprecated name of :func:`list_models`."""
    return _default().get_models(sort_by, order_by, name or None, description or None)


whoami = _delegate(Determined.whoami)
get_session_username = _delegate(Determined.get_session_username)
create_experiment = _delegate(Determined.create_experiment)
get_experiment = _delegate(Determined.get_experiment)
list_experiments = _delegate(Determined.list_experiments)
get_trial = _delegate(Determined.get_trial)
get_checkpoint = _delegate(Determined.get_checkpoint)
create_user = _delegate(Determined.create_user)
get_user_by_id = _delegate(Determined.get_user_by_id)
get_user_by_name = _delegate(Determined.get_user_by_name)
list_users = _delegate(Determined.list_users)
create_model = _delegate(Determined.create_model)
get_model = _delegate(Determined.get_model)
get_model_by_id = _delegate(Determined.get_model_by_id)
list_models = _delegate(Determined.list_models)
get_model_labels = _delegate(Determined.get_model_labels)
iter_trials_metrics = _delegate(Determined.iter_trials_metrics)
stream_trials_metrics = _delegate(Determined.stream_trials_metrics)
stream_trials_training_metrics = _delegate(Determined.stream_trials_training_metrics)
stream_trials_validation_metrics = _delegate(Determined.stream_trials_validation_metrics)
create_workspace = _delegate(Determined.create_workspace)
get_workspace = _delegate(Determined.get_workspace)
list_workspaces = _delegate(Determined.list_workspaces)
delete_workspace = _delegate(Determined.delete_workspace)
