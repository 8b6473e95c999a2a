"""The model registry: the resource client for ``/api/v1/models/...`` and their versions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from determined.client import _routes as r
from determined.client._session import Session

Params = Mapping[str, Any]


class ModelsClient:
    """One method per model-registry endpoint; a model is named by its name or numeric id, and each
    method returns the master's JSON answer."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def list(self, params: Params | None = None) -> dict[str, Any]:
        """One page of models (``models``, ``pagination``)."""
        return r.call(self.session, r.MODELS_LIST, params=params)

    def create(self, fields: Mapping[str, Any]) -> dict[str, Any]:
        """Add a model (``name``, ``description``, ``metadata``, ``labels``, ...): ``model``."""
        return r.call(self.session, r.MODEL_CREATE, body=dict(fields))

    def labels(self) -> dict[str, Any]:
        """Every label used on a model, most used first (``labels``)."""
        return r.call(self.session, r.MODEL_LABELS)

    def get(self, model: str | int) -> dict[str, Any]:
        """One model (``model``)."""
        return r.call(self.session, r.MODEL_GET, model_name=model)

    def patch(self, model: str | int, fields: Mapping[str, Any]) -> dict[str, Any]:
        """Change a model's attributes; the answer holds the new ``model``."""
        return r.call(self.session, r.MODEL_PATCH, body=dict(fields), model_name=model)

    def delete(self, model: str | int) -> dict[str, Any]:
        """Delete a model and its versions (the checkpoints stay)."""
        return r.call(self.session, r.MODEL_DELETE, model_name=model)

    def archive(self, model: str | int) -> dict[str, Any]:
        """Archive a model."""
        return r.call(self.session, r.MODEL_ARCHIVE, model_name=model)

    def unarchive(self, model: str | int) -> dict[str, Any]:
        """Unarchive a model."""
        return r.call(self.session, r.MODEL_UNARCHIVE, model_name=model)

    def versions(self, model: str | int, params: Params | None = None) -> dict[str, Any]:
        """One page of a model's versions (``model``, ``modelVersions``, ``pagination``)."""
        return r.call(self.session, r.MODEL_VERSIONS, params=params, model_name=model)

    def create_version(self, model: str | int, fields: Mapping[str, Any]) -> dict[str, Any]:
        """Register a checkpoint (``checkpointUuid``, ...) as the next version: ``modelVersion``."""
        return r.call(self.session, r.MODEL_VERSION_CREATE, body=dict(fields), model_name=model)

    def get_version(self, model: str | int, version: int) -> dict[str, Any]:
        """One version of a model (``modelVersion``)."""
        return r.call(self.session, r.MODEL_VERSION_GET, model_name=model, version=int(version))

    def patch_version(
        self, model: str | int, version: int, fields: Mapping[str, Any]
    ) -> dict[str, Any]:
        """Change a version's name, notes, labels or metadata; the answer holds ``modelVersion``."""
        return r.call(
            self.session,
            r.MODEL_VERSION_PATCH,
            body=dict(fields),
            model_name=model,
            version=int(version),
        )

    def delete_version(self, model: str | int, version: int) -> dict[str, Any]:
        """Delete one version of a model."""
        return r.call(self.session, r.MODEL_VERSION_DELETE, model_name=model, version=int(version))

    def version_metrics(
        self,
        model: str | int,
        version: int,
        *,
        group: str | None = None,
        source_type: str | None = None,
    ) -> dict[str, Any]:
        """The reports of the trials that used a model version (``metrics``)."""
        params = {"metricGroup": group, "trialSourceInfoType": source_type}
        return r.call(
            self.session,
            r.MODEL_VERSION_METRICS,
            params=params,
            model_name=model,
            version=int(version),
        )
