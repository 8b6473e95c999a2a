"""Turning per-batch metrics into reported ones: conversion, averaging, cross-rank reduction.

Kept off the per-batch path: a training batch only detaches its tensors; conversion to Python
numbers (one device sync) and any cross-rank gather happen once per reported workload.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from determined.pytorch._reducer import Reducer

if TYPE_CHECKING:
    from determined.core import DistributedContext


def detach_metrics(metrics: Any) -> dict[str, Any]:
    """A batch's returned metrics as a dict whose tensors no longer hold the autograd graph.

    Tensors stay on their device (no sync per batch); the dict is updated in place, as upstream did.
    """
    if isinstance(metrics, torch.Tensor):
        return {"loss": metrics.detach()}
    if type(metrics) is not dict:
        if not isinstance(metrics, Mapping):
            raise TypeError(
                "train_batch() must return a dict of metrics or a loss tensor, "
                f"not {type(metrics).__name__}"
            )
        metrics = dict(metrics)
    for name, value in metrics.items():
        if isinstance(value, torch.Tensor) and value.requires_grad:
            metrics[name] = value.detach()
    return metrics


def to_python(value: Any) -> Any:
    """A JSON-friendly value: scalars become numbers, arrays and tensors nested lists."""
    if isinstance(value, torch.Tensor):
        value = value.detach()
        return value.item() if value.dim() == 0 else value.cpu().tolist()
    if isinstance(value, np.ndarray):
        return value.item() if value.ndim == 0 else value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {k: to_python(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_python(v) for v in value]
    return value


def batch_metrics_to_python(batches: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Convert a workload's batch metrics at once (scalar tensors are stacked: one sync)."""
    if not batches:
        return []
    fast = _same_scalar_tensors(batches)
    if fast is not None:
        return fast
    scalars: dict[str, list[torch.Tensor]] = {}
    for metrics in batches:
        for name, value in metrics.items():
            if isinstance(value, torch.Tensor) and value.dim() == 0:
                scalars.setdefault(name, []).append(value)
    stacked: dict[str, list[Any]] = {}
    for name, values in scalars.items():
        if len(values) == len(batches):
            try:
                stacked[name] = torch.stack(values).cpu().tolist()
            except RuntimeError:  # mixed devices or dtypes
                pass
    out = []
    for index, metrics in enumerate(batches):
        converted = {}
        for name, value in metrics.items():
            converted[name] = stacked[name][index] if name in stacked else to_python(value)
        out.append(converted)
    return out


def _same_scalar_tensors(batches: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """The common case, converted without a per-value Python loop: every batch returned the same
    names, each a 0-dim tensor (``None`` when that does not hold, for the general path)."""
    names = list(batches[0])
    keys = batches[0].keys()
    if any(m.keys() != keys for m in batches):
        return None
    columns = []
    for name in names:
        values = [m[name] for m in batches]
        if not all(type(v) is torch.Tensor and v.dim() == 0 for v in values):
            return None
        try:
            columns.append(torch.stack(values).cpu().tolist())
        except RuntimeError:  # mixed devices or dtypes
            return None
    if not columns:
        return [{} for _ in batches]
    return [dict(zip(names, row, strict=True)) for row in zip(*columns, strict=True)]


_NUMBER_TYPES = (int, float)


def average_metrics(batches: list[dict[str, Any]]) -> dict[str, Any]:
    """The mean of each metric over batches (``None`` values ignored; non-numeric -> ``None``)."""
    names: dict[str, None] = {}
    for metrics in batches:
        names.update(dict.fromkeys(metrics))
    out: dict[str, Any] = {}
    for name in names:
        values = [v for m in batches if (v := m.get(name)) is not None]
        if not values:
            out[name] = None
        elif all(type(v) in _NUMBER_TYPES for v in values):  # exact types: bool is not a number
            out[name] = math.fsum(values) / len(values)
        else:
            try:
                out[name] = float(np.mean(np.asarray(values, dtype=np.float64)))
            except (TypeError, ValueError):
                out[name] = None
    return out


def average_across_ranks(per_rank: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Per batch index, the mean of every rank's values (ranks with fewer batches are skipped)."""
    longest = max((len(b) for b in per_rank), default=0)
    return [
        average_metrics([batches[i] for batches in per_rank if i < len(batches)])
        for i in range(longest)
    ]


# ---- validation ---------------------------------------------------------------------------------


def prepare_reducers(
    reducer: Reducer | Mapping[str, Reducer], keys: list[str]
) -> dict[str, Reducer]:
    """One Reducer per metric name, checking a per-metric dict covers exactly ``keys``."""
    if isinstance(reducer, Mapping):
        if set(reducer) != set(keys):
            raise ValueError(
                "evaluation_reducer(): a dict of reducers must name every validation metric; "
                f"metrics {sorted(keys)}, reducers {sorted(reducer)}"
            )
        chosen = dict(reducer)
    else:
        chosen = dict.fromkeys(keys, reducer)
    for name, value in chosen.items():
        if not isinstance(value, Reducer):
            raise TypeError(
                f"evaluation_reducer(): the reducer for {name!r} must be a det.pytorch.Reducer, "
                f"not {value!r}"
            )
    return chosen


def _as_array(value: Any) -> np.ndarray:  # type: ignore[type-arg]
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy().astype(np.float64)
    return np.asarray(value, dtype=np.float64)


def partial_reduce(
    batches: list[tuple[dict[str, Any], int]], reducers: dict[str, Reducer]
) -> dict[str, tuple[Any, float]]:
    """This rank's contribution per metric: ``(value, weight)`` ready to be combined."""
    out: dict[str, tuple[Any, float]] = {}
    for name, reducer in reducers.items():
        values = [_as_array(metrics[name]) for metrics, _ in batches]
        if not values:
            continue
        stacked = np.stack(values, axis=0)
        if reducer == Reducer.AVG:
            weights = np.asarray([max(n, 0) for _, n in batches], dtype=np.float64)
            if weights.sum() <= 0:
                weights = np.ones(len(batches))
            shape = (-1,) + (1,) * (stacked.ndim - 1)
            out[name] = ((stacked * weights.reshape(shape)).sum(axis=0), float(weights.sum()))
        elif reducer == Reducer.SUM:
            out[name] = (stacked.sum(axis=0), float(len(values)))
        elif reducer == Reducer.MAX:
            out[name] = (stacked.max(axis=0), float(len(values)))
        else:
            out[name] = (stacked.min(axis=0), float(len(values)))
    return out


def combine_partials(
    partials: list[dict[str, tuple[Any, float]]], reducers: dict[str, Reducer]
) -> dict[str, Any]:
    """Combine every rank's :func:`partial_reduce` into the final metrics."""
    out: dict[str, Any] = {}
    for name, reducer in reducers.items():
        parts = [p[name] for p in partials if name in p]
        if not parts:
            continue
        values = np.stack([np.asarray(v) for v, _ in parts], axis=0)
        if reducer == Reducer.AVG:
            total = sum(w for _, w in parts)
            result = values.sum(axis=0) / total
        elif reducer == Reducer.SUM:
            result = values.sum(axis=0)
        elif reducer == Reducer.MAX:
            result = values.max(axis=0)
        else:
            result = values.min(axis=0)
        out[name] = to_python(result)
    return out


def reduce_validation(
    dist: DistributedContext,
    batches: list[tuple[dict[str, Any], int]],
    reducer: Reducer | Mapping[str, Reducer],
) -> dict[str, Any] | None:
    """The reduced validation metrics on the chief (``None`` on the other ranks).

    ``batches`` holds this rank's ``(metrics, batch length)`` pairs; a rank may have none.
    """
    keys = list(batches[0][0]) if batches else []
    partial = partial_reduce(batches, prepare_reducers(reducer, keys)) if keys else {}
    gathered = [partial] if dist.size == 1 else dist.gather(partial)
    if gathered is None:
        return None
    names: dict[str, None] = {}
    for part in gathered:
        names.update(dict.fromkeys(part))
    return combine_partials(gathered, prepare_reducers(reducer, list(names)))
