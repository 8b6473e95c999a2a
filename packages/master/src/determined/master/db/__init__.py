"""The master's persistence: ORM models, the engine and migrations."""

from __future__ import annotations

from determined.master.db._engine import Database
from determined.master.db._models import (
    Allocation,
    Base,
    Checkpoint,
    ClusterMessage,
    ClusterMeta,
    Experiment,
    ExperimentSnapshot,
    Metric,
    Model,
    ModelVersion,
    Run,
    StorageBackend,
    Task,
    TaskLog,
    TrialSourceInfo,
    User,
    UserSession,
    utcnow,
)
from determined.master.db._queries import (
    checkpoint_validation_metrics,
    latest_completed_checkpoint,
    registered_versions,
    validation_at_step,
)
from determined.master.db._task_models import NtscTask

__all__ = [
    "Allocation",
    "Base",
    "Checkpoint",
    "ClusterMessage",
    "ClusterMeta",
    "Database",
    "Experiment",
    "ExperimentSnapshot",
    "Metric",
    "Model",
    "ModelVersion",
    "NtscTask",
    "Run",
    "StorageBackend",
    "Task",
    "TaskLog",
    "TrialSourceInfo",
    "User",
    "UserSession",
    "checkpoint_validation_metrics",
    "latest_completed_checkpoint",
    "registered_versions",
    "utcnow",
    "validation_at_step",
]
