"""The searcher's lengths for a Hugging Face Trainer: config checks and ASHA's rungs.

Determined 0.38 dropped the searcher-operations protocol, so its callback only checked that the
searcher's length matches the Trainer's and let an ASHA search stop a trial through a preemption
signal that arrives some time after the rung's validation. det's master still hands out ASHA's rung
lengths as operations (``core_context.searcher.operations()``); following them makes the searcher's
verdict at each rung synchronous: the trial evaluates at the rung, reports the searcher metric and
learns at once whether it goes on.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from determined import core

ASHA_SEARCHERS = ("adaptive_asha", "async_halving")
TIME_UNITS = ("batches", "epochs")


def trainer_length(max_steps: int, num_train_epochs: float) -> tuple[str, float, str]:
    """The Trainer's training length as ``(unit, length, argument)``: steps when ``max_steps``
    is set (it wins over epochs in the Trainer too), else epochs."""
    if max_steps > -1:
        return "batches", max_steps, "--max_steps"
    return "epochs", num_train_epochs, "--num_train_epochs"


def check_searcher_length(
    searcher: Mapping[str, Any], max_steps: int, num_train_epochs: float
) -> str | None:
    """Check the searcher's length against the Trainer's; return the unit both count in.

    Returns ``"batches"`` or ``"epochs"`` when the searcher configures a length in one of them
    (the legacy ``max_length``, or an ASHA searcher's ``time_metric``/``max_time``), ``None`` when
    it configures none or counts a metric of the training code's own.

    Raises:
        ValueError: the lengths disagree, or ``max_length`` is a bare number (no unit).
    """
    unit, length, argument = trainer_length(max_steps, num_train_epochs)
    max_length = searcher.get("max_length")
    if isinstance(max_length, int) and not isinstance(max_length, bool):
        raise ValueError(
            "searcher.max_length is deprecated and has no unit, which the Hugging Face Trainer "
            f"cannot follow; remove it and let {argument} set the training length"
        )
    if isinstance(max_length, Mapping) and max_length:
        search_unit, search_length = next(iter(max_length.items()))
        if (search_unit, search_length) != (unit, length):
            raise ValueError(
                f"the Trainer's length ({unit}={length}, from {argument}) does not match "
                f"searcher.max_length ({search_unit}={search_length}); searcher.max_length is "
                "deprecated: remove it, or make the two agree"
            )
        return unit
    if searcher.get("name") in ASHA_SEARCHERS:
        search_unit, search_length = searcher.get("time_metric"), searcher.get("max_time")
        if search_unit not in TIME_UNITS:
            return None  # a metric of the training code's own; it must report it
        if (search_unit, search_length) != (unit, length):
            raise ValueError(
                f"the Trainer's length ({unit}={length}, from {argument}) does not match the "
                f"{searcher['name']} searcher's max_time ({search_unit}={search_length}); change "
                f"searcher.max_time or {argument} so they agree"
            )
        return unit
    return None


class SearcherRungs:
    """An ASHA search's rungs for this trial, from ``core_context.searcher.operations()``.

    Every rank must create it and call :meth:`complete` in step (the chief asks the master and
    broadcasts the answer).
    """

    def __init__(self, searcher: core.SearcherContext, unit: str) -> None:
        self.unit = unit
        self._operations: Iterator[core.SearcherOperation] = searcher.operations()
        self._operation: core.SearcherOperation | None = next(self._operations, None)

    @property
    def length(self) -> int | None:
        """The length (in :attr:`unit`) of the rung being trained to; ``None`` when none is left."""
        return None if self._operation is None else self._operation.length

    def reached(self, position: float | None) -> bool:
        """Whether training at ``position`` (steps or epochs) has reached the current rung."""
        length = self.length
        return length is not None and position is not None and position >= length - 1e-9

    def complete(self, searcher_metric: Any, is_chief: bool) -> bool:
        """Report the current rung done with ``searcher_metric``; return whether the searcher
        wants this trial to train on (``False`` when it stopped the trial or needs no more)."""
        if self._operation is None:
            return False
        if is_chief:
            self._operation.report_completed(searcher_metric)
        self._operation = next(self._operations, None)
        return self._operation is not None
