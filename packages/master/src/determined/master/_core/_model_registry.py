"""The model-registry service: models and their versions (registered checkpoints).

Values arrive parsed and type-checked by the API edge; this service enforces what needs the
database: unique names (case-insensitive), archived models staying unchanged, COMPLETED checkpoints
only, consecutive version numbers, and who may delete what.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from determined.master._wire import APIError, numeric_id, unstate
from determined.master.db import Checkpoint, Database, Model, ModelVersion, User, utcnow


@dataclasses.dataclass(frozen=True)
class ModelFields:
    """A model's editable fields (None in a change: leave as is)."""

    name: str | None = None
    description: str | None = None
    notes: str | None = None
    metadata: dict[str, Any] | None = None
    labels: list[str] | None = None
    workspace_id: int | None = None


@dataclasses.dataclass(frozen=True)
class VersionFields:
    """A model version's editable fields (None in a change: leave as is)."""

    name: str | None = None
    comment: str | None = None
    notes: str | None = None
    labels: list[str] | None = None
    metadata: dict[str, Any] | None = None


def find_model(session: Session, identifier: str) -> Model:
    """The model named ``identifier`` (or with that numeric id); 404 otherwise."""
    number = numeric_id(identifier)
    if number is not None:
        model = session.get(Model, number)
    else:
        model = session.scalar(select(Model).where(Model.name == identifier))
    if model is None:
        raise APIError(404, f"model {identifier!r} not found")
    return model


def find_version(session: Session, identifier: str, number: int) -> tuple[Model, ModelVersion]:
    """A version of a model; 404 otherwise."""
    model = find_model(session, identifier)
    version = session.scalar(
        select(ModelVersion).where(
            ModelVersion.model_id == model.id, ModelVersion.version == number
        )
    )
    if version is None:
        raise APIError(404, f"version {number} of model {identifier!r} not found")
    return model, version


def check_unused(session: Session, name: str, *, field: str, exclude_id: int | None = None) -> str:
    """``name`` when no other model has it (case-insensitive); 409 naming ``field`` otherwise."""
    stmt = select(Model.id).where(func.lower(Model.name) == name.lower())
    if exclude_id is not None:
        stmt = stmt.where(Model.id != exclude_id)
    if session.scalar(stmt) is not None:
        raise APIError(409, f"{field}: a model named {name!r} already exists (case-insensitive)")
    return name


def _may_delete(requester: User, owner_id: int | None, what: str) -> None:
    if not requester.admin and requester.id != owner_id:
        raise APIError(403, f"only the owner of this {what} or an admin may delete it")


class ModelRegistry:
    """Writes of models and model versions."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def create(self, fields: ModelFields, user_id: int) -> int:
        """A new model; returns its id."""
        with self._db.write() as session:
            name = check_unused(session, fields.name or "", field="name")
            now = utcnow()
            row = Model(
                name=name,
                description=fields.description or "",
                metadata_=fields.metadata or {},
                labels=fields.labels or [],
                notes=fields.notes or "",
                user_id=user_id,
                workspace_id=fields.workspace_id,
                creation_time=now,
                last_updated_time=now,
            )
            session.add(row)
            session.flush()
            return int(row.id)

    def change(self, identifier: str, fields: ModelFields) -> int:
        """Apply ``fields`` to an unarchived model; returns its id."""
        with self._db.write() as session:
            model = find_model(session, identifier)
            if model.archived:
                raise APIError(
                    400, f"model {model.name!r} is archived and cannot have attributes updated"
                )
            if fields.name is not None and fields.name != model.name:
                model.name = check_unused(
                    session, fields.name, field="model.name", exclude_id=model.id
                )
            if fields.description is not None:
                model.description = fields.description
            if fields.notes is not None:
                model.notes = fields.notes
            if fields.metadata is not None:
                model.metadata_ = fields.metadata
            if fields.labels is not None:
                model.labels = fields.labels
            if fields.workspace_id is not None:
                model.workspace_id = fields.workspace_id
            model.last_updated_time = utcnow()
            return int(model.id)

    def set_archived(self, identifier: str, archived: bool) -> None:
        """Archive (no more changes or versions) or unarchive a model."""
        with self._db.write() as session:
            model = find_model(session, identifier)
            model.archived = archived
            model.last_updated_time = utcnow()

    def move(self, identifier: str, workspace_id: int) -> None:
        """Move a model to another workspace."""
        with self._db.write() as session:
            model = find_model(session, identifier)
            model.workspace_id = workspace_id
            model.last_updated_time = utcnow()

    def delete(self, identifier: str, requester: User) -> None:
        """Delete a model and its versions (its owner or an admin); the checkpoints stay."""
        with self._db.write() as session:
            model = find_model(session, identifier)
            _may_delete(requester, model.user_id, "model")
            session.execute(delete(ModelVersion).where(ModelVersion.model_id == model.id))
            session.delete(model)

    def register_version(
        self, identifier: str, checkpoint_uuid: str, fields: VersionFields, user_id: int
    ) -> int:
        """Register a COMPLETED checkpoint as the model's next version; returns its number."""
        for attempt in range(3):
            try:
                return self._register_version(identifier, checkpoint_uuid, fields, user_id)
            except IntegrityError:
                # Two registrations raced for the same version number (PostgreSQL): take the next.
                if attempt == 2:
                    raise APIError(409, "checkpointUuid: concurrent registrations; retry") from None
        raise AssertionError("unreachable")

    def _register_version(
        self, identifier: str, uuid: str, fields: VersionFields, user_id: int
    ) -> int:
        with self._db.write() as session:
            model = find_model(session, identifier)
            if model.archived:
                raise APIError(
                    400, f"model {model.name!r} is archived and cannot register new versions"
                )
            ckpt = session.scalar(select(Checkpoint).where(Checkpoint.uuid == uuid))
            if ckpt is None:
                raise APIError(404, f"checkpointUuid: checkpoint {uuid} not found")
            if ckpt.state != "COMPLETED":
                raise APIError(
                    400,
                    f"checkpointUuid: checkpoint {uuid} is in state {unstate(ckpt.state)}; "
                    "model versions need a COMPLETED checkpoint",
                )
            latest = session.scalar(
                select(func.max(ModelVersion.version)).where(ModelVersion.model_id == model.id)
            )
            now = utcnow()
            row = ModelVersion(
                model_id=model.id,
                version=int(latest or 0) + 1,
                checkpoint_uuid=uuid,
                user_id=user_id,
                creation_time=now,
                last_updated_time=now,
                name=fields.name or "",
                comment=fields.comment or "",
                notes=fields.notes or "",
                labels=fields.labels or [],
                metadata_=fields.metadata or {},
            )
            session.add(row)
            model.last_updated_time = now
            session.flush()
            return int(row.version)

    def change_version(self, identifier: str, number: int, fields: VersionFields) -> None:
        """Apply ``fields`` to a version of an unarchived model."""
        with self._db.write() as session:
            model, row = find_version(session, identifier, number)
            if model.archived:
                raise APIError(
                    400, f"model {model.name!r} is archived and its versions cannot be updated"
                )
            for field in ("name", "comment", "notes", "labels"):
                value = getattr(fields, field)
                if value is not None:
                    setattr(row, field, value)
            if fields.metadata is not None:
                row.metadata_ = fields.metadata
            row.last_updated_time = utcnow()
            model.last_updated_time = row.last_updated_time

    def delete_version(self, identifier: str, number: int, requester: User) -> None:
        """Delete a version (its registrant or an admin); the checkpoint stays."""
        with self._db.write() as session:
            model, row = find_version(session, identifier, number)
            _may_delete(requester, row.user_id, "model version")
            session.delete(row)
            model.last_updated_time = utcnow()
