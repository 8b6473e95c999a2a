"""Metric reports of trials (upstream's ``determined.experimental.metrics``)."""

from __future__ import annotations

from determined.experimental._metrics import TrainingMetrics, TrialMetrics, ValidationMetrics

__all__ = ["TrainingMetrics", "TrialMetrics", "ValidationMetrics"]
