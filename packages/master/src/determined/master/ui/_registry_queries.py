"""The UI's reads of the model registry: models with version counts, versions with checkpoints."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from determined.master._wire import APIError, numeric_id
from determined.master.db import Checkpoint, Model, ModelVersion, User
from determined.master.db._visibility import models_visible


def list_models(
    session: Session, include_archived: bool = False, visible: Collection[int] | None = None
) -> list[dict[str, Any]]:
    """Every model (of the ``visible`` workspaces; None: all) with its number of versions and
    owner: two queries."""
    stmt = select(Model, User.username).outerjoin(User, User.id == Model.user_id)
    if visible is not None:
        stmt = stmt.where(models_visible(visible))
    if not include_archived:
        stmt = stmt.where(Model.archived.is_(False))
    models = list(session.execute(stmt.order_by(Model.last_updated_time.desc(), Model.id.desc())))
    counts = dict(
        session.execute(
            select(ModelVersion.model_id, func.count(ModelVersion.id)).group_by(
                ModelVersion.model_id
            )
        ).all()
    )
    return [
        {"model": m, "owner": owner or "", "versions": int(counts.get(m.id, 0))}
        for m, owner in models
    ]


def get_model(session: Session, name: str, visible: Collection[int] | None = None) -> Model:
    """A model by name (or numeric id) in a ``visible`` workspace; 404 otherwise."""
    model = session.scalar(select(Model).where(Model.name == name))
    if model is None and numeric_id(name) is not None:
        model = session.get(Model, numeric_id(name))
    if model is None or (visible is not None and model.workspace_id not in visible):
        raise APIError(404, f"model {name!r} not found")
    return model


def model_versions(session: Session, model: Model) -> list[dict[str, Any]]:
    """The versions of a model with their checkpoints (one joined query)."""
    rows = session.execute(
        select(ModelVersion, Checkpoint, User.username)
        .outerjoin(Checkpoint, Checkpoint.uuid == ModelVersion.checkpoint_uuid)
        .outerjoin(User, User.id == ModelVersion.user_id)
        .where(ModelVersion.model_id == model.id)
        .order_by(ModelVersion.version.desc())
    )
    return [{"version": v, "checkpoint": c, "owner": owner or ""} for v, c, owner in rows]


def get_model_version(session: Session, model: Model, number: int) -> ModelVersion:
    version = session.scalar(
        select(ModelVersion).where(
            ModelVersion.model_id == model.id, ModelVersion.version == number
        )
    )
    if version is None:
        raise APIError(404, f"model {model.name!r} has no version {number}")
    return version
