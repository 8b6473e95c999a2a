"""Submitting an experiment: the one request the CLI, the Hydra launcher and the SDK share."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from determined.client._context_dir import read_context_dir
from determined.client._session import Session


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
    context_dir: str | os.PathLike[str] | None,
    *,
    includes: Sequence[str | os.PathLike[str]] = (),
    activate: bool = True,
    project_id: int | None = None,
    parent_id: int | None = None,
    validate_only: bool = False,
) -> CreatedExperiment:
    """``POST /api/v1/experiments`` with the config (a mapping or YAML text) and the context dir.

    Raises:
        ValueError: the context directory is missing or too large (see ``read_context_dir``).
        APIError: the master refused the config; its message names the field.
    """
    text = config if isinstance(config, str) else yaml.safe_dump(dict(config), sort_keys=False)
    body: dict[str, Any] = {
        "config": text,
        "modelDefinition": read_context_dir(context_dir, list(includes)),
        "activate": activate,
    }
    if project_id is not None:
        body["projectId"] = project_id
    if parent_id is not None:
        body["parentId"] = parent_id
    if validate_only:
        body["validateOnly"] = True
    answer = session.request("POST", "/api/v1/experiments", body=body, idempotent=False) or {}
    experiment = answer.get("experiment") or {}
    return CreatedExperiment(
        id=int(experiment["id"]) if experiment.get("id") is not None else None,
        config=dict(answer.get("config") or {}),
        warnings=[str(w) for w in answer.get("warnings") or []],
        config_warnings=[str(w) for w in answer.get("configWarnings") or []],
    )
