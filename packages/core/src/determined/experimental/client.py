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

import logging
import pathlib
from collections.abc import Iterable
from typing import Any

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
from determined.experimental._trial import LogLevel, Trial, TrialOrderBy, TrialSortBy, TrialState
from determined.experimental._user import User
from determined.experimental._util import OrderBy

CheckpointOrderBy = OrderBy
"""Deprecated name of :class:`OrderBy`."""

logger = logging.getLogger("determined.client")

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
    "TrainingMetrics",
    "Trial",
    "TrialMetrics",
    "TrialOrderBy",
    "TrialSortBy",
    "TrialState",
    "User",
    "ValidationMetrics",
    "create_experiment",
    "create_model",
    "create_user",
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
    "iter_trials_metrics",
    "list_experiments",
    "list_models",
    "list_users",
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


def whoami() -> User:
    """The user of the default session."""
    return _default().whoami()


def get_session_username() -> str:
    """The username of the default session."""
    return _default().get_session_username()


def create_experiment(
    config: str | pathlib.Path | dict[str, Any],
    model_dir: str | pathlib.Path | None = None,
    includes: Iterable[str | pathlib.Path] | None = None,
    project_id: int | None = None,
    template: str | None = None,
    *,
    parent_id: int | None = None,
    activate: bool = True,
) -> Experiment:
    """Create an experiment from a config file path or dict and a context directory
    (see :meth:`Determined.create_experiment`)."""
    return _default().create_experiment(
        config,
        model_dir,
        includes,
        project_id,
        template,
        parent_id=parent_id,
        activate=activate,
    )


def get_experiment(experiment_id: int) -> Experiment:
    """The experiment with id ``experiment_id``."""
    return _default().get_experiment(experiment_id)


def list_experiments(
    sort_by: ExperimentSortBy | None = None,
    order_by: OrderBy | None = None,
    experiment_ids: list[int] | None = None,
    labels: list[str] | None = None,
    users: list[str] | None = None,
    states: list[ExperimentState] | None = None,
    name: str | None = None,
    project_id: int | None = None,
) -> list[Experiment]:
    """Experiments matching every given filter, sorted."""
    return _default().list_experiments(
        sort_by=sort_by,
        order_by=order_by,
        experiment_ids=experiment_ids,
        labels=labels,
        users=users,
        states=states,
        name=name,
        project_id=project_id,
    )


def get_trial(trial_id: int) -> Trial:
    """The trial with id ``trial_id``."""
    return _default().get_trial(trial_id)


def get_checkpoint(uuid: str) -> Checkpoint:
    """The checkpoint with this uuid."""
    return _default().get_checkpoint(uuid)


def create_user(
    username: str, admin: bool, password: str | None = None, remote: bool = False
) -> User:
    """Create a user (admins only)."""
    return _default().create_user(username, admin, password, remote)


def get_user_by_id(user_id: int) -> User:
    """The user with id ``user_id``."""
    return _default().get_user_by_id(user_id)


def get_user_by_name(user_name: str) -> User:
    """The user named ``user_name``."""
    return _default().get_user_by_name(user_name)


def list_users(active: bool | None = None) -> list[User]:
    """Every user (only the active or inactive ones with ``active``)."""
    return _default().list_users(active=active)


def create_model(
    name: str, description: str | None = "", metadata: dict[str, Any] | None = None
) -> Model:
    """Add a model to the model registry."""
    return _default().create_model(name, description, metadata)


def get_model(identifier: str | int) -> Model:
    """The model with this name (or numeric id)."""
    return _default().get_model(identifier)


def get_model_by_id(model_id: int) -> Model:
    """Deprecated: ``get_model(model_id)``."""
    return _default().get_model_by_id(model_id)


def list_models(
    sort_by: ModelSortBy = ModelSortBy.NAME,
    order_by: OrderBy = OrderBy.ASCENDING,
    name: str | None = None,
    description: str | None = None,
    model_id: int | None = None,
    workspace_names: list[str] | None = None,
    workspace_ids: list[int] | None = None,
) -> list[Model]:
    """Models of the registry matching every given filter, sorted."""
    return _default().list_models(
        sort_by=sort_by,
        order_by=order_by,
        name=name,
        description=description,
        model_id=model_id,
        workspace_names=workspace_names,
        workspace_ids=workspace_ids,
    )


def get_models(
    sort_by: ModelSortBy = ModelSortBy.NAME,
    order_by: OrderBy = OrderBy.ASCENDING,
    name: str = "",
    description: str = "",
) -> list[Model]:
    """Deprecated name of :func:`list_models`."""
    return _default().get_models(sort_by, order_by, name or None, description or None)


def get_model_labels() -> list[str]:
    """Every label used on a model, most used first."""
    return _default().get_model_labels()


def iter_trials_metrics(trial_ids: list[int], group: str) -> Iterable[TrialMetrics]:
    """Yield the metric reports of ``group`` ("training", "validation" or a custom group) of
    trials, in step order per trial."""
    return _default().iter_trials_metrics(trial_ids, group=group)


def stream_trials_metrics(trial_ids: list[int], group: str) -> Iterable[TrialMetrics]:
    """Deprecated name of :func:`iter_trials_metrics`."""
    return _default().stream_trials_metrics(trial_ids, group)


def stream_trials_training_metrics(trial_ids: list[int]) -> Iterable[TrainingMetrics]:
    """Deprecated: ``iter_trials_metrics(trial_ids, "training")``."""
    return _default().stream_trials_training_metrics(trial_ids)


def stream_trials_validation_metrics(trial_ids: list[int]) -> Iterable[ValidationMetrics]:
    """Deprecated: ``iter_trials_metrics(trial_ids, "validation")``."""
    return _default().stream_trials_validation_metrics(trial_ids)
