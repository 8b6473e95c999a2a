"""Upstream's ``determined.common.api.metric``: reading a validation metric from a workload."""

from __future__ import annotations

from typing import Any


def get_validation_metric(metric_name: str, validation: Any) -> Any:
    """The value of ``metric_name`` in a validation record's ``metrics.validation_metrics``
    (``None`` when the record or the metric is missing)."""
    if not validation or not validation.get("metrics"):
        return None
    return (validation["metrics"].get("validation_metrics") or {}).get(metric_name)
