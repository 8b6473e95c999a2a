"""Reducers: how per-batch validation metrics, and custom metrics, become one value per workload.

``Reducer`` (AVG, SUM, MAX, MIN) reduces the dicts returned by ``evaluate_batch``. For metrics that
must be computed over the whole dataset across ranks (ROC AUC, per-class IoU, ...) register a
:class:`MetricReducer`, or a plain function, with ``context.wrap_reducer()``.
"""

from __future__ import annotations

import abc
import enum
import itertools
from collections.abc import Callable
from typing import Any, TypeVar, overload


class Reducer(enum.Enum):
    """A built-in reduction of one validation metric over every batch on every rank.

    ``AVG`` is the mean over all validation *samples* (each batch weighted by its length, so a short
    last batch or uneven shards do not skew it; upstream weighted batches equally within a rank and
    ranks by batch count). ``SUM``, ``MAX`` and ``MIN`` are over all batches.
    """

    AVG = 1
    SUM = 2
    MAX = 3
    MIN = 4


class MetricReducer(metaclass=abc.ABCMeta):
    """A distributed-aware custom metric.

    Update it however you like during ``train_batch``/``evaluate_batch``; at the end of each workload
    det calls ``per_slot_reduce()`` on every rank, gathers the results, and calls
    ``cross_slot_reduce(per_slot_values)`` on every rank. ``reset()`` runs before each workload.
    """

    @abc.abstractmethod
    def reset(self) -> None:
        """Clear the state before a training or validation workload."""

    @abc.abstractmethod
    def per_slot_reduce(self) -> Any:
        """This rank's intermediate value (sent to the others: keep it small and picklable)."""

    @abc.abstractmethod
    def cross_slot_reduce(self, per_slot_metrics: list[Any]) -> Any:
        """The final metric from every rank's intermediate value: a dict of metrics when wrapped
        with ``name=None``, a single metric otherwise."""


class _SimpleReducer(MetricReducer):
    """A reducer function in the MetricReducer API: buffers ``update()`` values, calls the function
    on all of them (from every rank, interleaved back into their original order)."""

    def __init__(self, fn: Callable[[list[Any]], Any]) -> None:
        self.fn = fn
        self.values: list[Any] = []

    def reset(self) -> None:
        self.values = []

    def update(self, value: Any) -> None:
        self.values.append(value)

    def per_slot_reduce(self) -> Any:
        return self.values

    def cross_slot_reduce(self, per_slot_metrics: list[Any]) -> Any:
        missing = object()
        interleaved = itertools.zip_longest(*per_slot_metrics, fillvalue=missing)
        return self.fn([v for group in interleaved for v in group if v is not missing])


class _WrappedReducer:
    def __init__(
        self, reducer: MetricReducer, name: str | None, for_training: bool, for_validation: bool
    ) -> None:
        self.reducer = reducer
        self.name = name
        self.for_training = for_training
        self.for_validation = for_validation

    def _describe(self) -> str:
        if isinstance(self.reducer, _SimpleReducer):
            return f"reducer function {getattr(self.reducer.fn, '__name__', self.reducer.fn)!s}()"
        return f"reducer {type(self.reducer).__name__} (name={self.name!r})"

    def call(self, what: str, *args: Any) -> Any:
        try:
            return getattr(self.reducer, what)(*args)
        except Exception as exc:
            raise ValueError(f"{self._describe()} failed in {what}(): {exc}") from exc


T = TypeVar("T", bound=MetricReducer)


def _local_allgather(value: Any) -> list[Any]:
    return [value]


class _PyTorchReducerContext:
    """The ``wrap_reducer`` part of the trial context."""

    def __init__(self, allgather_fn: Callable[[Any], list[Any]] = _local_allgather) -> None:
        self._wrapped_reducers: list[_WrappedReducer] = []
        self._allgather_fn = allgather_fn

    def reset_reducers(self) -> None:
        for wrapped in self._wrapped_reducers:
            wrapped.call("reset")

    @overload
    def wrap_reducer(
        self,
        reducer: Callable[[list[Any]], Any],
        name: str | None = None,
        for_training: bool = True,
        for_validation: bool = True,
    ) -> _SimpleReducer: ...

    @overload
    def wrap_reducer(
        self,
        reducer: T,
        name: str | None = None,
        for_training: bool = True,
        for_validation: bool = True,
    ) -> T: ...

    def wrap_reducer(
        self,
        reducer: Any,
        name: str | None = None,
        for_training: bool = True,
        for_validation: bool = True,
    ) -> Any:
        """Register a custom metric that is reduced correctly across ranks.

        Args:
            reducer: a :class:`MetricReducer`, or a function taking the flat list of every value
                passed to ``.update()`` (on every rank) and returning the metric.
            name: the metric's name, or ``None`` when the reducer returns a dict of metrics.
            for_training: include it in training workloads.
            for_validation: include it in validation.

        Returns:
            The MetricReducer itself, or for a function an object whose ``update(value)`` you call.
        """
        if any(w.reducer is reducer for w in self._wrapped_reducers):
            raise ValueError("wrap_reducer: this reducer object is already wrapped")
        if not isinstance(reducer, MetricReducer):
            if not callable(reducer):
                raise TypeError(
                    "wrap_reducer: reducer must be a function or a det.pytorch.MetricReducer, "
                    f"not {type(reducer).__name__}"
                )
            reducer = _SimpleReducer(reducer)
        if name is not None and not isinstance(name, str):
            raise TypeError(f"wrap_reducer: name must be a string or None, not {name!r}")
        self._wrapped_reducers.append(_WrappedReducer(reducer, name, for_training, for_validation))
        return reducer

    def _has_reducers(self, for_training: bool) -> bool:
        return any(
            (w.for_training if for_training else w.for_validation) for w in self._wrapped_reducers
        )

    def reduce_metrics(self, for_training: bool) -> dict[str, Any]:
        """Every applicable reducer's metric(s); one allgather for all of them."""
        wanted = [
            w
            for w in self._wrapped_reducers
            if (w.for_training if for_training else w.for_validation)
        ]
        if not wanted:
            return {}
        gathered = self._allgather_fn([w.call("per_slot_reduce") for w in wanted])
        return self.run_cross_slot_reduction(wanted, gathered)

    def run_cross_slot_reduction(
        self, reducables: list[_WrappedReducer], gathered: list[list[Any]]
    ) -> dict[str, Any]:
        """The metrics of ``reducables`` from ``gathered``: one list per rank holding each
        reducer's ``per_slot_reduce()`` value, in the order of ``reducables``."""
        metrics: dict[str, Any] = {}
        for index, wrapped in enumerate(reducables):
            reduced = wrapped.call("cross_slot_reduce", [slot[index] for slot in gathered])
            if wrapped.name is None:
                if not isinstance(reduced, dict):
                    raise ValueError(
                        f"{wrapped._describe()} was wrapped with name=None, so it must return a "
                        f"dict of metrics, but it returned a {type(reduced).__name__}; pass name= "
                        "to wrap_reducer() for a single metric"
                    )
                metrics.update(reduced)
            else:
                if isinstance(reduced, dict):
                    raise ValueError(
                        f"{wrapped._describe()} was wrapped with name={wrapped.name!r} but "
                        "returned a dict; leave name=None to return several metrics"
                    )
                metrics[wrapped.name] = reduced
        return metrics
