"""Experiments: the resource client and ``create_experiment``, the one submit the CLI, the Hydra
launcher and the SDK share."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from determined.client import _routes as r
from determined.client._context_dir import read_context_dir
from determined.client._session import Session

Params = Mapping[str, Any]


class ExperimentsClient:
    """``/api/v1/experiments/...``: one method per endpoint; each returns the master's JSON answer."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def list(self, params: Params | None = None) -> dict[str, Any]:
        """One page of experiments (``experiments``, ``pagination``); filters as upstream names them."""
        return r.call(self.session, r.EXPERIMENTS_LIST, params=params)

    def create(
        self,
        config: str,
        model_definition: Sequence[Mapping[str, Any]],
        *,
        activate: bool = True,
        project_id: int | None = None,
        parent_id: int | None = None,
        validate_only: bool = False,
        template: str | None = None,
    ) -> dict[str, Any]:
        """Submit an experiment: ``experiment``, ``config``, ``warnings``, ``configWarnings``.

        ``template`` names a config template the master merges underneath ``config``.
        """
        body: dict[str, Any] = {
            "config": config,
            "modelDefinition": list(model_definition),
            "activate": activate,
        }
        if project_id is not None:
            body["projectId"] = project_id
        if parent_id is not None:
            body["parentId"] = parent_id
        if validate_only:
            body["validateOnly"] = True
        if template is not None:
            body["template"] = template
        return r.call(self.session, r.EXPERIMENT_CREATE, body=body)

    def create_unmanaged(self, config: str, *, project_id: int | None = None) -> dict[str, Any]:
        """Create an unmanaged experiment (one that ``core_v2`` runs outside the master):
        ``experiment``, ``config``."""
        body: dict[str, Any] = {"config": config, "unmanaged": True}
        if project_id is not None:
            body["projectId"] = project_id
        return r.call(self.session, r.EXPERIMENT_CREATE, body=body)

    def put_unmanaged(
        self, external_experiment_id: str, config: str, *, project_id: int | None = None
    ) -> dict[str, Any]:
        """The unmanaged experiment with this external id, created on first use (its config is
        replaced by ``config``): ``experiment``, ``config``."""
        body: dict[str, Any] = {"config": config, "unmanaged": True}
        if project_id is not None:
            body["projectId"] = project_id
        return r.call(
            self.session,
            r.EXPERIMENT_PUT,
            body=body,
            external_experiment_id=external_experiment_id,
        )

    def continue_experiment(self, experiment_id: int, override_config: str) -> dict[str, Any]:
        """Run a finished experiment's trials again with ``override_config`` (YAML) merged in."""
        body = {"id": experiment_id, "overrideConfig": override_config}
        return r.call(self.session, r.EXPERIMENT_CONTINUE, body=body)

    def get(self, experiment_id: int | str) -> dict[str, Any]:
        """``experiment``, ``config`` and ``jobSummary`` of one experiment."""
        return r.call(self.session, r.EXPERIMENT_GET, experiment_id=experiment_id)

    def patch(self, experiment_id: int | str, fields: Mapping[str, Any]) -> dict[str, Any]:
        """Change name, description, notes or labels; the answer holds the new ``experiment``."""
        return r.call(
            self.session, r.EXPERIMENT_PATCH, body=dict(fields), experiment_id=experiment_id
        )

    def add_label(self, experiment_id: int | str, label: str) -> dict[str, Any]:
        """Put one label on an experiment; the answer holds all its ``labels``."""
        return r.call(
            self.session, r.EXPERIMENT_LABEL_PUT, experiment_id=experiment_id, label=label
        )

    def remove_label(self, experiment_id: int | str, label: str) -> dict[str, Any]:
        """Take one label off an experiment; the answer holds the ``labels`` left."""
        return r.call(
            self.session, r.EXPERIMENT_LABEL_DELETE, experiment_id=experiment_id, label=label
        )

    def labels(self, project_id: int | None = None) -> dict[str, Any]:
        """Every label used on an experiment (of one project), most used first (``labels``)."""
        return r.call(self.session, r.EXPERIMENT_LABELS, params={"projectId": project_id})

    def delete(self, experiment_id: int | str) -> dict[str, Any]:
        """Delete an experiment with its checkpoints and logs (the master does it asynchronously)."""
        return r.call(self.session, r.EXPERIMENT_DELETE, experiment_id=experiment_id)

    def act(self, experiment_id: int | str, action: str, *, retry: bool = True) -> dict[str, Any]:
        """``activate``, ``pause``, ``cancel``, ``kill``, ``archive`` or ``unarchive`` an experiment.

        ``retry=False`` sends it once (the CLI's choice: a person sees the error instead).
        """
        route = r.EXPERIMENT_ACTIONS[action]
        return r.call(self.session, route, body={}, idempotent=retry, experiment_id=experiment_id)

    def trials(self, experiment_id: int | str, params: Params | None = None) -> dict[str, Any]:
        """One page of an experiment's trials (``trials``, ``pagination``)."""
        return r.call(self.session, r.EXPERIMENT_TRIALS, params=params, experiment_id=experiment_id)

    def checkpoints(self, experiment_id: int | str, params: Params | None = None) -> dict[str, Any]:
        """One page of an experiment's checkpoints (``checkpoints``, ``pagination``)."""
        return r.call(
            self.session, r.EXPERIMENT_CHECKPOINTS, params=params, experiment_id=experiment_id
        )

    def model_def(self, experiment_id: int | str) -> dict[str, Any]:
        """The uploaded context directory as a base64 tar.gz (``b64Tgz``)."""
        return r.call(self.session, r.EXPERIMENT_MODEL_DEF, experiment_id=experiment_id)

    def best_searcher_validation_metric(self, experiment_id: int | str) -> dict[str, Any]:
        """The best searcher metric reported so far (``metric``)."""
        return r.call(self.session, r.EXPERIMENT_BEST_SEARCHER_METRIC, experiment_id=experiment_id)

    def delete_tensorboard_files(self, experiment_id: int | str) -> dict[str, Any]:
        """Remove the experiment's TensorBoard files from its checkpoint storage."""
        return r.call(
            self.session, r.EXPERIMENT_TENSORBOARD_FILES_DELETE, experiment_id=experiment_id
        )

    def preview_hp_search(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """The plan of a search (``summary``) for an experiment config, without creating it."""
        return r.call(self.session, r.PREVIEW_HP_SEARCH, body={"config": dict(config)})


@dataclasses.dataclass(frozen=True)
class CreatedExperiment:
    """What the master answered to a create request.

    Attributes:
        id: the new experiment's id (``None`` for a ``validate_only`` request).
        config: the experiment config after the master filled in its defaults.
        warnings: upstream's launch warnings (enum names).
        config_warnings: deprecations and other notes about the config.
    """

    id: int | None
    config: dict[str, Any]
    warnings: list[str]
    config_warnings: list[str]


def create_experiment(
    session: Session,
    config: Mapping[str, Any] | str,
    context_dir: str | os.PathLike[str] | Sequence[Mapping[str, Any]] | None,
    *,
    includes: Sequence[str | os.PathLike[str]] = (),
    activate: bool = True,
    project_id: int | None = None,
    parent_id: int | None = None,
    validate_only: bool = False,
    template: str | None = None,
) -> CreatedExperiment:
    """``POST /api/v1/experiments`` with the config (a mapping or YAML text) and the context.

    ``context_dir`` is a directory to package (with ``includes``), or the files
    :func:`read_context_dir` already packaged (the CLI reads them first to report their size).

    Raises:
        ValueError: the context directory is missing or too large (see ``read_context_dir``).
        APIError: the master refused the config; its message names the field.
    """
    text = config if isinstance(config, str) else yaml.safe_dump(dict(config), sort_keys=False)
    if context_dir is None or isinstance(context_dir, (str, os.PathLike)):
        files = read_context_dir(context_dir, list(includes))
    else:
        if includes:
            raise ValueError("includes: give them to read_context_dir with the context directory")
        files = [dict(f) for f in context_dir]
    answer = ExperimentsClient(session).create(
        text,
        files,
        activate=activate,
        project_id=project_id,
        parent_id=parent_id,
        validate_only=validate_only,
        template=template,
    )
    experiment = answer.get("experiment") or {}
    return CreatedExperiment(
        id=int(experiment["id"]) if experiment.get("id") else None,  # 0: validate_only
        config=dict(answer.get("config") or {}),
        warnings=[str(w) for w in answer.get("warnings") or []],
        config_warnings=[str(w) for w in answer.get("configWarnings") or []],
    )
