"""``Model`` and ``ModelVersion``: the model registry (named, versioned checkpoints)."""

from __future__ import annotations

import datetime
import enum
import json
from collections.abc import Iterable
from typing import Any

from determined.client import Client, Session
from determined.experimental._checkpoint import Checkpoint
from determined.experimental._metrics import INFERENCE_SOURCE, TrialMetrics
from determined.experimental._util import OrderBy, deprecated, parse_time, read_paginated


class ModelSortBy(enum.Enum):
    """Fields a list of models can be sorted by."""

    NAME = "SORT_BY_NAME"
    DESCRIPTION = "SORT_BY_DESCRIPTION"
    CREATION_TIME = "SORT_BY_CREATION_TIME"
    LAST_UPDATED_TIME = "SORT_BY_LAST_UPDATED_TIME"
    NUM_VERSIONS = "SORT_BY_NUM_VERSIONS"
    WORKSPACE = "SORT_BY_WORKSPACE"


ModelOrderBy = OrderBy
"""Deprecated name of :class:`OrderBy`."""


def _labels(labels: Any) -> list[str]:
    if isinstance(labels, str) or not all(isinstance(x, str) for x in labels):
        raise ValueError(f"labels: must be a list of strings, got {labels!r}")
    return list(labels)


class ModelVersion:
    """A checkpoint registered under a model with a version number (1, 2, ...).

    Attributes (cached; :meth:`reload` refreshes them): ``model_name``, ``model_version``,
    ``model_id``, ``checkpoint`` (a :class:`Checkpoint`), ``metadata``, ``name``, ``comment``,
    ``notes``, ``labels``.
    """

    def __init__(self, session: Session, model_version: int, model_name: str) -> None:
        self._session = session
        self._api = Client(session)
        self.model_name = model_name
        self.model_version = model_version
        self.model_id: int | None = None
        self.checkpoint: Checkpoint | None = None
        self.metadata: dict[str, Any] | None = None
        self.name: str | None = None
        self.comment: str | None = None
        self.notes: str | None = None
        self.labels: list[str] | None = None

    def __repr__(self) -> str:
        return f"ModelVersion(model={self.model_name!r}, version={self.model_version})"

    def _hydrate(self, data: dict[str, Any]) -> None:
        self.checkpoint = Checkpoint._from_json(data["checkpoint"], self._session)
        self.metadata = dict(data.get("metadata") or {})
        self.comment = data.get("comment") or ""
        self.notes = data.get("notes") or ""
        self.labels = list(data.get("labels") or [])
        self.model_version = int(data["version"])
        self.model_id = (data.get("model") or {}).get("id")
        self.name = data.get("name")

    @classmethod
    def _from_json(cls, data: dict[str, Any], session: Session) -> ModelVersion:
        version = cls(session, int(data["version"]), str(data["model"]["name"]))
        version._hydrate(data)
        return version

    def reload(self) -> None:
        """Refresh the cached attributes from the master."""
        answer = self._api.models.get_version(self.model_name, self.model_version)
        self._hydrate(answer["modelVersion"])

    def _patch(self, **fields: Any) -> None:
        answer = self._api.models.patch_version(self.model_name, self.model_version, fields)
        self._hydrate(answer["modelVersion"])

    def set_name(self, name: str) -> None:
        """Set the version's human-friendly name."""
        self._patch(name=name)

    def set_notes(self, notes: str) -> None:
        """Replace the version's notes."""
        self._patch(notes=notes)

    def set_labels(self, labels: list[str]) -> None:
        """Replace the version's labels."""
        self._patch(labels=_labels(labels))

    def add_metadata(self, metadata: dict[str, Any]) -> None:
        """Merge ``metadata`` into the version's metadata (top-level keys are replaced)."""
        if not isinstance(metadata, dict):
            raise ValueError(f"metadata: must be a dict, got {type(metadata).__name__}")
        self._patch(metadata={**(self.metadata or {}), **metadata})

    def delete(self) -> None:
        """Remove the version from the registry (the checkpoint stays)."""
        self._api.models.delete_version(self.model_name, self.model_version)

    def get_metrics(self, group: str | None = None) -> Iterable[TrialMetrics]:
        """Deprecated name of :meth:`iter_metrics`."""
        deprecated("ModelVersion.get_metrics()", "ModelVersion.iter_metrics()")
        return self.iter_metrics(group=group)

    def iter_metrics(self, group: str | None = None) -> Iterable[TrialMetrics]:
        """The metrics reported by the tasks that used this model version for inference.

        A task links itself to the version with
        ``core_context.experimental.report_task_using_model_version(model_version)``.

        Args:
            group: one metric group ("training", "validation", "inference", ...); ``None`` or
                ``""`` for every group.
        """
        answer = self._api.models.version_metrics(
            self.model_name, self.model_version, group=group or None, source_type=INFERENCE_SOURCE
        )
        for report in answer.get("metrics") or []:
            yield TrialMetrics._from_json(report, group or None)


class Model:
    """A model of the model registry.

    Attributes (cached; :meth:`reload` refreshes them): ``name``, ``model_id``, ``description``,
    ``creation_time``, ``last_updated_time``, ``metadata``, ``labels``, ``username``,
    ``workspace_id``, ``archived``.
    """

    def __init__(self, session: Session, name: str) -> None:
        self._session = session
        self._api = Client(session)
        self.name = name
        self.model_id: int | None = None
        self.description: str | None = None
        self.creation_time: datetime.datetime | None = None
        self.last_updated_time: datetime.datetime | None = None
        self.metadata: dict[str, Any] | None = None
        self.labels: list[str] | None = None
        self.username: str | None = None
        self.workspace_id: int | None = None
        self.archived: bool | None = None

    def __repr__(self) -> str:
        return f"Model(id={self.model_id}, name={self.name}, metadata={json.dumps(self.metadata)})"

    def _hydrate(self, data: dict[str, Any]) -> None:
        self.name = str(data["name"])
        self.model_id = data.get("id")
        self.description = data.get("description") or ""
        self.creation_time = parse_time(data.get("creationTime"))
        self.last_updated_time = parse_time(data.get("lastUpdatedTime"))
        self.metadata = dict(data.get("metadata") or {})
        self.labels = list(data.get("labels") or [])
        self.username = data.get("username") or ""
        self.workspace_id = data.get("workspaceId")
        self.archived = bool(data.get("archived"))

    @classmethod
    def _from_json(cls, data: dict[str, Any], session: Session) -> Model:
        model = cls(session, str(data["name"]))
        model._hydrate(data)
        return model

    @property
    def _key(self) -> str | int:
        """How the master's routes name this model: its id once known, else its name."""
        return self.model_id if self.model_id else self.name

    def reload(self) -> None:
        """Refresh the cached attributes from the master."""
        self._hydrate(self._api.models.get(self._key)["model"])

    def _patch(self, **fields: Any) -> None:
        self._hydrate(self._api.models.patch(self._key, fields)["model"])

    # ------------------------------------------------------------------------------ versions

    def register_version(self, checkpoint_uuid: str) -> ModelVersion:
        """Register a COMPLETED checkpoint as the model's next version.

        Raises:
            NotFoundError: no such checkpoint.
            APIError: the checkpoint is not COMPLETED, or the model is archived.
        """
        if not isinstance(checkpoint_uuid, str) or not checkpoint_uuid:
            raise ValueError(f"checkpoint_uuid: must be a checkpoint uuid, got {checkpoint_uuid!r}")
        body = {"checkpointUuid": checkpoint_uuid, "modelName": self.name}
        answer = self._api.models.create_version(self._key, body)
        return ModelVersion._from_json(answer["modelVersion"], self._session)

    def get_version(self, version: int = -1) -> ModelVersion | None:
        """Version ``version`` of the model; the latest (None if there is none) for -1.

        Raises:
            NotFoundError: no such version.
        """
        if version == -1:
            params = {"limit": 1, "sortBy": "SORT_BY_VERSION", "orderBy": "ORDER_BY_DESC"}
            answer = self._api.models.versions(self._key, params)
            versions = answer.get("modelVersions") or []
            return ModelVersion._from_json(versions[0], self._session) if versions else None
        answer = self._api.models.get_version(self._key, int(version))
        return ModelVersion._from_json(answer["modelVersion"], self._session)

    def list_versions(self, order_by: OrderBy = OrderBy.DESC) -> list[ModelVersion]:
        """Every version of the model, by version number (newest first by default)."""
        if not isinstance(order_by, OrderBy):
            raise ValueError(f"order_by: must be an OrderBy, got {order_by!r}")

        def fetch(offset: int) -> dict[str, Any]:
            params = {"offset": offset, "orderBy": order_by.value, "sortBy": "SORT_BY_VERSION"}
            return self._api.models.versions(self._key, params)

        return [
            ModelVersion._from_json(v, self._session)
            for v in read_paginated(fetch, "modelVersions")
        ]

    def get_versions(self, order_by: OrderBy = OrderBy.DESC) -> list[ModelVersion]:
        """Deprecated name of :meth:`list_versions`."""
        deprecated("Model.get_versions()", "Model.list_versions()")
        return self.list_versions(order_by)

    # ---------------------------------------------------------------------------- attributes

    def add_metadata(self, metadata: dict[str, Any]) -> None:
        """Merge ``metadata`` into the model's metadata (top-level keys are replaced)."""
        if not isinstance(metadata, dict):
            raise ValueError(f"metadata: must be a dict, got {type(metadata).__name__}")
        self._patch(metadata={**(self.metadata or {}), **metadata})

    def remove_metadata(self, keys: list[str]) -> None:
        """Remove top-level ``keys`` from the model's metadata."""
        if isinstance(keys, str) or not all(isinstance(k, str) for k in keys):
            raise ValueError(f"keys: must be a list of strings, got {keys!r}")
        self._patch(metadata={k: v for k, v in (self.metadata or {}).items() if k not in keys})

    def set_labels(self, labels: list[str]) -> None:
        """Replace the model's labels."""
        self._patch(labels=_labels(labels))

    def set_description(self, description: str) -> None:
        """Replace the model's description."""
        self._patch(description=description)

    def move_to_workspace(self, workspace_name: str) -> None:
        """Move the model to another workspace."""
        self._patch(workspaceName=workspace_name)

    def archive(self) -> None:
        """Archive the model: no changes and no new versions until it is unarchived."""
        self._api.models.archive(self._key)
        self.archived = True

    def unarchive(self) -> None:
        """Unarchive the model."""
        self._api.models.unarchive(self._key)
        self.archived = False

    def delete(self) -> None:
        """Delete the model and its versions (the checkpoints stay)."""
        self._api.models.delete(self._key)
