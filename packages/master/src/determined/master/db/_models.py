"""SQLAlchemy 2 ORM models of the master's tables (names follow Determined's schema where it matters).

JSON columns use SQLAlchemy's generic ``JSON`` type (``jsonb``-like text on SQLite, ``json`` on
PostgreSQL); timestamps are timezone-aware UTC datetimes stored as naive UTC by SQLite.
"""

from __future__ import annotations

import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


def utcnow() -> datetime.datetime:
    """The current time, timezone-aware UTC."""
    return datetime.datetime.now(datetime.timezone.utc)


class Base(DeclarativeBase):
    """Declarative base of every master table."""

    type_annotation_map = {dict[str, Any]: JSON, list[Any]: JSON}


class ClusterMeta(Base):
    """One row: the cluster id, fixed at first start."""

    __tablename__ = "cluster_id"
    cluster_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    created_at: Mapped[datetime.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class User(Base):
    """A user; ``password_hash`` is bcrypt of the client-side salted SHA-512 ('' = empty password)."""

    __tablename__ = "users"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    username: Mapped[str] = mapped_column(String(255), unique=True)
    display_name: Mapped[str | None] = mapped_column(String(255), nullable=True)
    password_hash: Mapped[str] = mapped_column(String(255), default="")
    admin: Mapped[bool] = mapped_column(Boolean, default=False)
    active: Mapped[bool] = mapped_column(Boolean, default=True)
    remote: Mapped[bool] = mapped_column(Boolean, default=False)
    modified_at: Mapped[datetime.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    last_auth_at: Mapped[datetime.datetime | None] = mapped_column(
        DateTime(timezone=True), nullable=True
    )
    agent_user_group: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    """``{agentUid, agentGid, agentUser, agentGroup}`` the user's tasks run as, or NULL."""


class UserSession(Base):
    """A login session; only the SHA-256 of the token is stored."""

    __tablename__ = "user_sessions"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    expiry: Mapped[datetime.datetime] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    token_type: Mapped[str] = mapped_column(String(32), default="USER_SESSION")
    revoked_at: Mapped[datetime.datetime | None] = mapped_column(
        DateTime(timezone=True), nullable=True
    )
    description: Mapped[str] = mapped_column(Text, default="", server_default="")
    """An access token's description (``token_type`` ACCESS_TOKEN rows are access tokens)."""
    __table_args__ = (Index("ix_user_sessions_user_id_token_type", "user_id", "token_type"),)


class Experiment(Base):
    """An experiment: its config, model definition, state and scheduling settings."""

    __tablename__ = "experiments"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    state: Mapped[str] = mapped_column(String(32), default="ACTIVE")
    config: Mapped[dict[str, Any]] = mapped_column(JSON)
    original_config: Mapped[str] = mapped_column(Text, default="")
    model_definition: Mapped[bytes | None] = mapped_column(
        LargeBinary, nullable=True, deferred=True
    )
    """The context tarball: loaded only when read (in its session), never with list queries."""
    start_time: Mapped[datetime.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    end_time: Mapped[datetime.datetime | None] = mapped_column(
        DateTime(timezone=True), nullable=True
    )
    archived: Mapped[bool] = mapped_column(Boolean, default=False)
    parent_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    owner_id: Mapped[int] = mapped_column(ForeignKey("users.id"))
    project_id: Mapped[int] = mapped_column(Integer, default=1, index=True)
    job_id: Mapped[str] = mapped_column(String(64), default="")
    progress: Mapped[float | None] = mapped_column(Float, nullable=True)
    notes: Mapped[str] = mapped_column(Text, default="")
    labels: Mapped[list[Any]] = mapped_column(JSON, default=list)
    priority: Mapped[int] = mapped_column(Integer, default=42)
    weight: Mapped[float] = mapped_column(Float, default=1.0)
    max_slots: Mapped[int | None] = mapped_column(Integer, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    unmanaged: Mapped[bool] = mapped_column(Boolean, default=False)
    """Created by ``core_v2`` outside the master: never scheduled, its trials report their state."""
    external_experiment_id: Mapped[str | None] = mapped_column(
        String(255), nullable=True, unique=True
    )


class ExperimentSnapshot(Base):
    """The searcher state of an experiment after its latest batch of actions."""

    __tablename__ = "experiment_snapshots"
    experiment_id: Mapped[int] = mapped_column(
        ForeignKey("experiments.id", ondelete="CASCADE"), primary_key=True
    )
    content: Mapped[dict[str, Any]] = mapped_column(JSON)
    version: Mapped[int] = mapped_column(Integer, default=6)
    updated_at: Mapped[datetime.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Run(Base):
    """A trial (upstream renamed ``trials`` to ``runs``)."""

    __tablename__ = "runs"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    experiment_id: Mapped[int] = mapped_column(ForeignKey("experiments.id", ondelete="CASCADE"))
    request_id: Mapped[str] = mapped_column(String(64))
    task_id: Mapped[str] = mapped_column(String(128), index=True)
    state: Mapped[str] = mapped_column(String(32), default="ACTIVE")
    start_time: Mapped[datetime.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    end_time: Mapped[datetime.datetime | None] = mapped_column(
        DateTime(timezone=True), nullable=True
    )
    hparams: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    seed: Mapped[int] = mapped_column(BigInteger, default=0)
    warm_start_checkpoint_uuid: Mapped[str | None] = mapped_column(String(64), nullable=True)
    run_id: Mapped[int] = mapped_column(Integer, default=0)
    restarts: Mapped[int] = mapped_column(Integer, default=0)
    total_batches: Mapped[int] = mapped_column(BigInteger, default=0)
    summary_metrics: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    latest_validation_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    best_validation_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    searcher_metric_value: Mapped[float | None] = mapped_column(Float, nullable=True)
    runner_state: Mapped[str] = mapped_column(String(255), default="")
    metadata_: Mapped[dict[str, Any]] = mapped_column("metadata", JSON, default=dict)
    early_stopped_by_searcher: Mapped[bool] = mapped_column(Boolean, default=False)
    early_exit_reason: Mapped[str | None] = mapped_column(String(64), nullable=True)
    progress: Mapped[float | None] = mapped_column(Float, nullable=True)
    last_activity: Mapped[datetime.datetime | None] = mapped_column(
        DateTime(timezone=True), nullable=True
    )
    archived: Mapped[bool] = mapped_column(Boolean, default=False)
    external_trial_id: Mapped[str | None] = mapped_column(String(255), nullable=True)
    """An unmanaged trial's id in the caller's world (a re-run with it finds this trial)."""
    log_policy_matched: Mapped[str | None] = mapped_column(String(255), nullable=True)
    """The name of the last named log policy the trial's output matched (migration 0011)."""
    __table_args__ = (
        Index("ix_runs_experiment_request", "experiment_id", "request_id"),
        Index("ix_runs_experiment_metric", "experiment_id", "searcher_metric_value", "id"),
        UniqueConstraint(
            "experiment_id", "external_trial_id", name="uq_runs_experiment_external_trial"
        ),
    )


class Metric(Base):
    """One metrics report of a trial (training, validation or a custom group)."""

    __tablename__ = "metrics"
    # BIGINT on PostgreSQL (migration 0009); SQLite's rowid alias must be spelled INTEGER.
    id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer(), "sqlite"), primary_key=True, autoincrement=True
    )
    # The foreign key exists on SQLite only: migration 0015 drops it on PostgreSQL (per-row cost).
    trial_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    trial_run_id: Mapped[int] = mapped_column(Integer)
    group: Mapped[str] = mapped_column("metric_group", String(255))
    total_batches: Mapped[int] = mapped_column(BigInteger)
    end_time: Mapped[datetime.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    metrics: Mapped[dict[str, Any]] = mapped_column(JSON)
    archived: Mapped[bool] = mapped_column(Boolean, default=False)
    __table_args__ = (Index("ix_metrics_trial_group", "trial_id", "metric_group", "total_batches"),)


class Checkpoint(Base):
    """A checkpoint reported by a trial (``checkpoints_v2`` upstream)."""

    __tablename__ = "checkpoints_v2"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    uuid: Mapped[str] = mapped_column(String(64), unique=True)
    task_id: Mapped[str] = mapped_column(String(128), default="")
    allocation_id: Mapped[str | None] = mapped_column(String(160), nullable=True)
    report_time: Mapped[datetime.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    state: Mapped[str] = mapped_column(String(32), default="COMPLETED")
    resources: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    metadata_: Mapped[dict[str, Any]] = mapped_column("metadata", JSON, default=dict)
    size: Mapped[int] = mapped_column(BigInteger, default=0)
    trial_id: Mapped[int | None] = mapped_column(Integer, nullable=True, index=True)
    experiment_id: Mapped[int | None] = mapped_column(Integer, nullable=True, index=True)
    storage_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    steps_completed: Mapped[int] = mapped_column(BigInteger, default=0)


class StorageBackend(Base):
    """A checkpoint storage config a trial started with (``runs/start`` returns its id)."""

    __tablename__ = "storage_backend"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    config: Mapped[dict[str, Any]] = mapped_column(JSON)


class Task(Base):
    """A task (one per trial; continue reuses it)."""

    __tablename__ = "tasks"
    task_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    task_type: Mapped[str] = mapped_column(String(32), default="TRIAL")
    job_id: Mapped[str] = mapped_column(String(64), default="")
    start_time: Mapped[datetime.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    end_time: Mapped[datetime.datetime | None] = mapped_column(
        DateTime(timezone=True), nullable=True
    )
    trial_id: Mapped[int | None] = mapped_column(Integer, nullable=True, index=True)


class Allocation(Base):
    """One attempt at running a task: its slots, process and how it ended."""

    __tablename__ = "allocations"
    allocation_id: Mapped[str] = mapped_column(String(160), primary_key=True)
    task_id: Mapped[str] = mapped_column(String(128), index=True)
    trial_id: Mapped[int | None] = mapped_column(Integer, nullable=True, index=True)
    state: Mapped[str] = mapped_column(String(32), default="PENDING", index=True)
    slots: Mapped[int] = mapped_column(Integer, default=1)
    resource_pool: Mapped[str] = mapped_column(String(64), default="default")
    pid: Mapped[int | None] = mapped_column(Integer, nullable=True)
    start_time: Mapped[datetime.datetime | None] = mapped_column(
        DateTime(timezone=True), nullable=True
    )
    end_time: Mapped[datetime.datetime | None] = mapped_column(
        DateTime(timezone=True), nullable=True
    )
    exit_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    exit_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    preemption_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    preemption_acked: Mapped[bool] = mapped_column(Boolean, default=False)
    is_ready: Mapped[bool] = mapped_column(Boolean, default=False)
    token_hash: Mapped[str] = mapped_column(String(64), default="", index=True)


class TaskLog(Base):
    """One log line of a task."""

    __tablename__ = "task_logs"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    task_id: Mapped[str] = mapped_column(String(128))
    allocation_id: Mapped[str | None] = mapped_column(String(160), nullable=True)
    agent_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    container_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    rank_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    timestamp: Mapped[datetime.datetime] = mapped_column(DateTime(timezone=True))
    level: Mapped[str | None] = mapped_column(String(32), nullable=True)
    log: Mapped[str] = mapped_column(Text)
    source: Mapped[str | None] = mapped_column(String(32), nullable=True)
    stdtype: Mapped[str | None] = mapped_column(String(16), nullable=True)
    __table_args__ = (Index("ix_task_logs_task_id", "task_id", "id"),)


class Model(Base):
    """A registered model of the model registry (``/api/v1/models``)."""

    __tablename__ = "models"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(255), unique=True)
    description: Mapped[str] = mapped_column(Text, default="")
    metadata_: Mapped[dict[str, Any]] = mapped_column("metadata", JSON, default=dict)
    labels: Mapped[list[Any]] = mapped_column(JSON, default=list)
    notes: Mapped[str] = mapped_column(Text, default="")
    archived: Mapped[bool] = mapped_column(Boolean, default=False)
    user_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    workspace_id: Mapped[int] = mapped_column(Integer, default=1)
    creation_time: Mapped[datetime.datetime] = mapped_column(
        DateTime(timezone=True), default=utcnow
    )
    last_updated_time: Mapped[datetime.datetime] = mapped_column(
        DateTime(timezone=True), default=utcnow
    )


class ModelVersion(Base):
    """A version of a registered model: a checkpoint with a name and comment."""

    __tablename__ = "model_versions"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    model_id: Mapped[int] = mapped_column(ForeignKey("models.id", ondelete="CASCADE"))
    version: Mapped[int] = mapped_column(Integer)
    checkpoint_uuid: Mapped[str] = mapped_column(String(64))
    name: Mapped[str] = mapped_column(String(255), default="")
    comment: Mapped[str] = mapped_column(Text, default="")
    notes: Mapped[str] = mapped_column(Text, default="")
    labels: Mapped[list[Any]] = mapped_column(JSON, default=list)
    metadata_: Mapped[dict[str, Any]] = mapped_column("metadata", JSON, default=dict)
    user_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    creation_time: Mapped[datetime.datetime] = mapped_column(
        DateTime(timezone=True), default=utcnow
    )
    last_updated_time: Mapped[datetime.datetime | None] = mapped_column(
        DateTime(timezone=True), nullable=True, default=utcnow
    )
    __table_args__ = (
        UniqueConstraint("model_id", "version", name="uq_model_versions_model_id_version"),
        Index("ix_model_versions_checkpoint_uuid", "checkpoint_uuid"),
    )


class TrialSourceInfo(Base):
    """A trial that used a checkpoint (or a model version's checkpoint): inference or fine-tuning.

    Reported by the task through ``POST /api/v1/trial-source-info``; read back as the metrics of
    the checkpoint or model version (``GET /api/v1/checkpoints/{uuid}/metrics``).
    """

    __tablename__ = "trial_source_infos"
    trial_id: Mapped[int] = mapped_column(
        ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True
    )
    checkpoint_uuid: Mapped[str] = mapped_column(String(64), primary_key=True)
    trial_source_info_type: Mapped[str] = mapped_column(String(64))
    model_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    model_version: Mapped[int | None] = mapped_column(Integer, nullable=True)
    __table_args__ = (
        Index("ix_trial_source_infos_checkpoint_uuid", "checkpoint_uuid"),
        Index("ix_trial_source_infos_model_version", "model_id", "model_version"),
    )


class ClusterMessage(Base):
    """A cluster-wide message from an admin, shown between ``start_time`` and ``end_time``."""

    __tablename__ = "cluster_messages"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    created_by: Mapped[int | None] = mapped_column(Integer, nullable=True)
    message: Mapped[str] = mapped_column(Text)
    start_time: Mapped[datetime.datetime] = mapped_column(DateTime(timezone=True))
    end_time: Mapped[datetime.datetime | None] = mapped_column(
        DateTime(timezone=True), nullable=True
    )
    created_time: Mapped[datetime.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
