"""The model registry (upstream's ``determined.experimental.model``)."""

from __future__ import annotations

from determined.experimental._model import Model, ModelOrderBy, ModelSortBy, ModelVersion

__all__ = ["Model", "ModelOrderBy", "ModelSortBy", "ModelVersion"]
