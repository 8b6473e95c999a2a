"""``Determined``: one authenticated session to a master and every SDK entry point on it."""

from __future__ import annotations

import os
import pathlib
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import yaml

from determined import client as _client
from determined.experimental import _metrics
from determined.experimental._checkpoint import Checkpoint
from determined.experimental._experiment import Experiment, ExperimentSortBy, ExperimentState
from determined.experimental._model import Model, ModelSortBy
from determined.experimental._trial import Trial
from determined.experimental._user import User, new_user_fields
from determined.experimental._util import OrderBy, deprecated, enum_value, read_paginated
from determined.experimental._workspace import WorkspaceMethods


class Determined(WorkspaceMethods):
    """A session to a det (or Determined) master.

    Logging in follows upstream's order: the given ``user`` (with ``password``, or the token
    ``det user login`` cached), then ``$DET_USER``/``$DET_PASS``, then the cached active user,
    then the default ``determined`` user with an empty password.

    Args:
        master: the master URL (default ``$DET_MASTER``, else ``localhost:8080``).
        user: the user to log in as.
        password: their password.
        cert_path: a CA bundle to verify an HTTPS master with.
        cert_name: accepted for compatibility; the host name in ``master`` is what is verified.
        noverify: do not verify the master's TLS certificate.

    Raises:
        UnauthenticatedError: the credentials were refused.
        MasterNotFoundError: nothing answers at ``master``.
    """

    def __init__(
        self,
        master: str | None = None,
        user: str | None = None,
        password: str | None = None,
        cert_path: str | None = None,
        cert_name: str | None = None,
        noverify: bool = False,
    ) -> None:
        self._master = _client.master_address(master)
        self._session = _client.login(self._master, user, password)
        if noverify:
            self._session.cert = False
        elif cert_path is not None:
            self._session.cert = cert_path
        self._api = _client.Client(self._session)
        self._username: str | None = None

    @classmethod
    def _from_session(cls, session: _client.Session) -> Determined:
        """A ``Determined`` over an existing session (no login)."""
        det = cls.__new__(cls)
        det._master = session.master_url
        det._session = session
        det._api = _client.Client(session)
        det._username = None
        return det

    def __repr__(self) -> str:
        return f"Determined(master={self._master!r})"

    # --------------------------------------------------------------------------------- users

    def whoami(self) -> User:
        """The user this session is logged in as."""
        user = User._from_json(self._api.users.me()["user"], self._session)
        self._username = user.username
        return user

    def get_session_username(self) -> str:
        """The username of this session."""
        if self._username is None:
            self.whoami()
        return str(self._username)

    def logout(self) -> None:
        """End this session on the master and forget its cached token."""
        username = self.get_session_username()
        token = self._session.token
        try:
            self._api.users.logout()
        except _client.UnauthenticatedError:
            pass  # already logged out on the master
        store = _client.TokenStore()
        if token and store.get(self._master, username) == token:
            store.drop(self._master, username)

    def create_user(
        self, username: str, admin: bool, password: str | None = None, remote: bool = False
    ) -> User:
        """Create a user (admins only); non-remote users need a password that passes upstream's
        complexity rules (see :func:`check_password_complexity`)."""
        answer = self._api.users.create(*new_user_fields(username, admin, password, remote))
        return User._from_json(answer["user"], self._session)

    def get_user_by_id(self, user_id: int) -> User:
        """The user with id ``user_id``."""
        answer = self._api.users.get(int(user_id))
        return User._from_json(answer["user"], self._session)

    def get_user_by_name(self, user_name: str) -> User:
        """The user named ``user_name``."""
        answer = self._api.users.get_by_name(user_name)
        return User._from_json(answer["user"], self._session)

    def list_users(self, active: bool | None = None) -> list[User]:
        """Every user (only active or only inactive ones with ``active``)."""
        params = {"active": None if active is None else str(bool(active)).lower()}
        pages = _all_pages(self._api.users.list, params, "users")
        return [User._from_json(u, self._session) for u in pages]

    # --------------------------------------------------------------------------- experiments

    def create_experiment(
        self,
        config: str | pathlib.Path | dict[str, Any],
        model_dir: str | pathlib.Path | None = None,
        includes: Iterable[str | pathlib.Path] | None = None,
        project_id: int | None = None,
        template: str | None = None,
        *,
        parent_id: int | None = None,
        activate: bool = True,
    ) -> Experiment:
        """Create an experiment and return it.

        Args:
            config: the path of a YAML config file, or the config as a dict.
            model_dir: the context directory to upload (None uploads nothing).
            includes: more files or directories to upload beside it.
            project_id: the project to put it in.
            template: a config template (``det template``) the master merges underneath
                ``config`` (the experiment's own values win).
            parent_id: the experiment this one forks (recorded as ``forkedFrom``).
            activate: start it at once (False creates it PAUSED).

        Raises:
            ValueError: a bad config argument, or the context directory is too large.
            APIError: the master refused the config; its message names the field.
        """
        text = _config_text(config)
        if model_dir is None and includes:
            raise ValueError("includes: needs a model_dir")
        created = _client.create_experiment(
            self._session,
            text,
            model_dir,
            includes=list(includes or ()),
            activate=activate,
            project_id=project_id,
            parent_id=parent_id,
            template=template,
        )
        assert created.id is not None
        return self.get_experiment(created.id)

    def get_experiment(self, experiment_id: int) -> Experiment:
        """The experiment with id ``experiment_id``."""
        answer = self._api.experiments.get(int(experiment_id))
        return Experiment._from_json(answer["experiment"], self._session)

    def list_experiments(
        self,
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
        base = {
            "sortBy": enum_value(sort_by, ExperimentSortBy, "sort_by") if sort_by else None,
            "orderBy": enum_value(order_by, OrderBy, "order_by") if order_by else None,
            "experimentIdFilter.incl": [int(i) for i in experiment_ids or ()] or None,
            "labels": labels,
            "users": users,
            "states": [enum_value(s, ExperimentState, "states") for s in states or ()] or None,
            "name": name,
            "projectId": project_id,
        }
        pages = _all_pages(self._api.experiments.list, base, "experiments")
        return [Experiment._from_json(e, self._session) for e in pages]

    def get_trial(self, trial_id: int) -> Trial:
        """The trial with id ``trial_id``."""
        answer = self._api.trials.get(int(trial_id))
        return Trial._from_json(answer["trial"], self._session)

    def get_checkpoint(self, uuid: str) -> Checkpoint:
        """The checkpoint with this uuid."""
        answer = self._api.checkpoints.get(uuid)
        return Checkpoint._from_json(answer["checkpoint"], self._session)

    # ------------------------------------------------------------------------------- metrics

    def iter_trials_metrics(
        self, trial_ids: list[int], group: str
    ) -> Iterable[_metrics.TrialMetrics]:
        """Yield the metric reports of ``group`` ("training", "validation", ...) of trials."""
        return _metrics.iter_trials_metrics(self._session, trial_ids, group)

    def stream_trials_metrics(
        self, trial_ids: list[int], group: str
    ) -> Iterable[_metrics.TrialMetrics]:
        """Deprecated name of :meth:`iter_trials_metrics`."""
        deprecated("Determined.stream_trials_metrics()", "Determined.iter_trials_metrics()")
        return self.iter_trials_metrics(trial_ids, group)

    def stream_trials_training_metrics(
        self, trial_ids: list[int]
    ) -> Iterable[_metrics.TrainingMetrics]:
        """Deprecated: ``iter_trials_metrics(trial_ids, "training")``."""
        deprecated("stream_trials_training_metrics()", 'iter_trials_metrics(ids, "training")')
        return _metrics.iter_trials_metrics(  # type: ignore[return-value]
            self._session, trial_ids, _metrics.TRAINING, _metrics.TrainingMetrics
        )

    def stream_trials_validation_metrics(
        self, trial_ids: list[int]
    ) -> Iterable[_metrics.ValidationMetrics]:
        """Deprecated: ``iter_trials_metrics(trial_ids, "validation")``."""
        deprecated("stream_trials_validation_metrics()", 'iter_trials_metrics(ids, "validation")')
        return _metrics.iter_trials_metrics(  # type: ignore[return-value]
            self._session, trial_ids, _metrics.VALIDATION, _metrics.ValidationMetrics
        )

    # -------------------------------------------------------------------------------- models

    def create_model(
        self,
        name: str,
        description: str | None = "",
        metadata: dict[str, Any] | None = None,
        labels: list[str] | None = None,
        workspace_name: str | None = None,
    ) -> Model:
        """Add a model to the registry (names are unique, case-insensitively)."""
        body = {
            "name": name,
            "description": description,
            "metadata": metadata,
            "labels": labels,
            "workspaceName": workspace_name,
        }
        body = {k: v for k, v in body.items() if v is not None}
        answer = self._api.models.create(body)
        return Model._from_json(answer["model"], self._session)

    def get_model(self, identifier: str | int) -> Model:
        """The model with this name (or numeric id)."""
        answer = self._api.models.get(identifier)
        return Model._from_json(answer["model"], self._session)

    def get_model_by_id(self, model_id: int) -> Model:
        """Deprecated: ``get_model(model_id)``."""
        deprecated("Determined.get_model_by_id()", "Determined.get_model()")
        return self.get_model(int(model_id))

    def list_models(
        self,
        sort_by: ModelSortBy = ModelSortBy.NAME,
        order_by: OrderBy = OrderBy.ASCENDING,
        name: str | None = None,
        description: str | None = None,
        model_id: int | None = None,
        workspace_names: list[str] | None = None,
        workspace_ids: list[int] | None = None,
    ) -> list[Model]:
        """Models of the registry; ``name``/``description`` match substrings, case-insensitively."""
        base = {
            "sortBy": enum_value(sort_by, ModelSortBy, "sort_by"),
            "orderBy": enum_value(order_by, OrderBy, "order_by"),
            "name": name,
            "description": description,
            "id": model_id,
            "workspaceNames": workspace_names,
            "workspaceIds": workspace_ids,
        }
        pages = _all_pages(self._api.models.list, base, "models")
        return [Model._from_json(m, self._session) for m in pages]

    def get_models(
        self,
        sort_by: ModelSortBy = ModelSortBy.NAME,
        order_by: OrderBy = OrderBy.ASCENDING,
        name: str | None = None,
        description: str | None = None,
        model_id: int | None = None,
        workspace_names: list[str] | None = None,
        workspace_ids: list[int] | None = None,
    ) -> list[Model]:
        """Deprecated name of :meth:`list_models`."""
        deprecated("Determined.get_models()", "Determined.list_models()")
        return self.list_models(
            sort_by, order_by, name, description, model_id, workspace_names, workspace_ids
        )

    def get_model_labels(self) -> list[str]:
        """Every label used on a model, most used first."""
        return list(self._api.models.labels().get("labels") or [])


def _config_text(config: str | pathlib.Path | dict[str, Any]) -> str:
    """The YAML text of an experiment config given as a dict or as the path of a YAML file."""
    if isinstance(config, dict):
        return str(yaml.safe_dump(config, sort_keys=False))
    if not isinstance(config, (str, pathlib.Path)):
        raise ValueError("config: must be a dict or the path of a YAML file")
    try:
        text = pathlib.Path(config).read_text()
    except OSError as e:
        raise ValueError(f"config: cannot read {os.fspath(config)!r}: {e}") from None
    try:
        yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ValueError(f"config: {os.fspath(config)!r} is not valid YAML: {e}") from None
    return text


def _all_pages(
    list_page: Callable[[dict[str, Any]], dict[str, Any]], params: dict[str, Any], key: str
) -> Iterator[Any]:
    """The ``key`` items of every page ``list_page(params + offset)`` returns."""
    return read_paginated(lambda offset: list_page({**params, "offset": offset}), key)
