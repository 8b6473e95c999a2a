"""Custom evaluation metrics: ``context.make_metric`` and :class:`MetricReducer`.

A metric made here is a ``(value_op, update_op)`` pair of ``py_func`` ops: every evaluation batch
hands its value to the reducer's ``accumulate``; reading the value gathers each slot's last
accumulation and calls ``cross_slot_reduce``.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import tensorflow as tf


class MetricReducer(abc.ABC):
    """Accumulates a metric over the batches of one slot, then reduces every slot's result."""

    @abc.abstractmethod
    def accumulate(self, metric: Any) -> Any:
        """Take one batch's value; return the state accumulated so far."""

    @abc.abstractmethod
    def cross_slot_reduce(self, per_slot_metrics: list[Any]) -> Any:
        """The final metric from each slot's last ``accumulate`` result (one entry per slot)."""


class _ListReducer(MetricReducer):
    """A plain function of all per-batch values, as a MetricReducer."""

    def __init__(self, reduce_fn: Callable[[list[Any]], Any]) -> None:
        self.values: list[Any] = []
        self.reduce_fn = reduce_fn

    def accumulate(self, metric: Any) -> list[Any]:
        self.values.append(metric)
        return self.values

    def cross_slot_reduce(self, per_slot_metrics: list[list[Any]]) -> Any:
        return self.reduce_fn([value for values in per_slot_metrics for value in values])


def _flatten(metric: Any) -> tuple[Sequence[Any], Callable[[Sequence[Any]], Any]]:
    """The tensors of ``metric`` (a tensor, flat list or flat dict) and how to rebuild it."""
    if isinstance(metric, tf.Tensor | tf.Variable):
        return [metric], lambda values: values[0]
    if isinstance(metric, list | tuple):
        return list(metric), lambda values: list(values)
    if isinstance(metric, dict):
        for key in metric:
            if not isinstance(key, str):
                raise TypeError(f"make_metric: dict metrics need string keys, got {key!r}")
        keys = list(metric)
        return [metric[k] for k in keys], lambda values: dict(zip(keys, values, strict=True))
    try:
        return [tf.compat.v1.constant(metric)], lambda values: values[0]
    except (TypeError, ValueError):
        raise TypeError(
            "make_metric: metric must be a tensor, a flat list of tensors or a flat dict of "
            f"tensors, not {type(metric).__name__}"
        ) from None


def make_metric(
    metric: Any,
    reducer: Callable[[list[Any]], Any] | MetricReducer,
    numpy_dtype: Any,
    allgather: Callable[[Any], list[Any]],
) -> tuple[Any, Any]:
    """``(value_op, update_op)`` for ``reducer`` over ``metric`` (see the module docstring)."""
    if not isinstance(reducer, MetricReducer):
        if not callable(reducer):
            raise TypeError("make_metric: reducer must be a function or a MetricReducer")
        reducer = _ListReducer(reducer)
    tensors, rebuild = _flatten(metric)
    dtype = np.dtype(numpy_dtype)
    state: dict[str, Any] = {"last": None}
    chosen = reducer

    def update(*values: Any) -> None:
        state["last"] = chosen.accumulate(rebuild(values))

    def value() -> Any:
        per_slot = allgather(state["last"])
        return np.asarray(chosen.cross_slot_reduce(per_slot)).astype(dtype)

    update_op = tf.compat.v1.py_func(update, list(tensors), [])
    value_op = tf.compat.v1.py_func(value, [], tf.as_dtype(dtype))
    return value_op, update_op
