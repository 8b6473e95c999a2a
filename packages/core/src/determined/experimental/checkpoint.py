"""Checkpoints and how to download them (upstream's ``determined.experimental.checkpoint``)."""

from __future__ import annotations

from determined.experimental._checkpoint import (
    Checkpoint,
    CheckpointSortBy,
    CheckpointState,
    CheckpointStateException,
    CheckpointTrainingMetadata,
    DownloadMode,
    MultipleDownloadsFailed,
    ProxiedDownloadFailed,
)
from determined.experimental._util import OrderBy

CheckpointOrderBy = OrderBy
"""Deprecated name of :class:`OrderBy`."""

__all__ = [
    "Checkpoint",
    "CheckpointOrderBy",
    "CheckpointSortBy",
    "CheckpointState",
    "CheckpointStateException",
    "CheckpointTrainingMetadata",
    "DownloadMode",
    "MultipleDownloadsFailed",
    "ProxiedDownloadFailed",
]
