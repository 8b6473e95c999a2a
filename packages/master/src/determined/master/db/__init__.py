"""The master's persistence: ORM models, the engine and migrations."""

from __future__ import annotations

from determined.master.db._engine import Database
from determined.master.db._models import (
    Allocation,
    Base,
    Checkpoint,
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
    User,
    UserSession,
    utcnow,
)

__all__ = [
    "Allocation",
    "Base",
    "Checkpoint",
    "ClusterMeta",
    "Database",
    "Experiment",
    "ExperimentSnapshot",
    "Metric",
    "Model",
    "ModelVersion",
    "Run",
    "StorageBackend",
    "Task",
    "TaskLog",
    "User",
    "UserSession",
    "utcnow",
]
