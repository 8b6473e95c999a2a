"""Deprecated home of the SDK: use ``determined.experimental`` (same names)."""

from __future__ import annotations

import warnings

from determined.experimental import (
    Checkpoint,
    Determined,
    Experiment,
    ExperimentReference,
    Model,
    ModelOrderBy,
    ModelSortBy,
    ModelVersion,
    OrderBy,
    Project,
    TrainingMetrics,
    Trial,
    TrialMetrics,
    TrialOrderBy,
    TrialReference,
    TrialSortBy,
    ValidationMetrics,
)

warnings.warn(
    "The 'determined.common.experimental' module is deprecated; import from "
    "'determined.experimental' instead (for example `from determined.experimental import client`).",
    FutureWarning,
    stacklevel=2,
)

__all__ = [
    "Checkpoint",
    "Determined",
    "Experiment",
    "ExperimentReference",
    "Model",
    "ModelOrderBy",
    "ModelSortBy",
    "ModelVersion",
    "OrderBy",
    "Project",
    "TrainingMetrics",
    "Trial",
    "TrialMetrics",
    "TrialOrderBy",
    "TrialReference",
    "TrialSortBy",
    "ValidationMetrics",
]
