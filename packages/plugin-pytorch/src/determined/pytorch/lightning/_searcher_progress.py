"""The Core API searcher loop for a Lightning run: complete operations as training passes them."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytorch_lightning as pl

from determined.pytorch.lightning._logger import _epochs_completed

if TYPE_CHECKING:
    import determined as det
    from determined.core import SearcherOperation

logger = logging.getLogger("determined.pytorch.lightning")


class SearcherProgress:
    """Walks ``core_context.searcher.operations()`` along a Lightning run (every rank, in step).

    The chief reports each operation completed with the searcher metric; when the searcher wants no
    more training from this trial, the run is stopped.
    """

    def __init__(self, core_context: det.core.Context, is_chief: bool) -> None:
        self._core = core_context
        self._is_chief = is_chief
        self._operations: Iterator[SearcherOperation] | None = None
        self._operation: SearcherOperation | None = None
        self._epoch_units = False

    def start(self) -> None:
        """Start the searcher loop; skipped when the experiment configures no usable length."""
        from determined.core import Unit

        units = self._core.searcher.get_configured_units()
        if units == Unit.RECORDS:
            logger.warning("searcher lengths in records are not supported with Lightning: ignored")
            return
        self._epoch_units = units == Unit.EPOCHS
        operations = self._core.searcher.operations()
        try:
            self._operation = next(operations, None)
        except ValueError as exc:  # the experiment configures no length
            logger.debug("no searcher operations: %s", exc)
            return
        self._operations = operations

    def advance(self, trainer: pl.Trainer, metric: float | None) -> None:
        """Complete the operations this run has trained past; stop the run when none are left."""
        if self._operations is None or metric is None:
            return
        step = _epochs_completed(trainer) if self._epoch_units else trainer.global_step
        while self._operation is not None and step >= self._operation.length:
            if self._is_chief:
                self._operation.report_completed(metric)
            self._operation = next(self._operations, None)
        if self._operation is None:
            self.close()
            if not trainer.should_stop and trainer.global_step < trainer.estimated_stepping_batches:
                logger.info("the searcher needs no more training from this trial: stopping")
                trainer.should_stop = True

    @property
    def awaits_final_metric(self) -> bool:
        """Whether this rank reports an operation still open when training ends (the chief)."""
        return self._operation is not None and self._is_chief

    def complete(self, metric: float | None) -> None:
        """Training ended: report the open operation completed with ``metric`` (if any)."""
        if self._operation is not None and metric is not None:
            self._operation.report_completed(metric)
            self._operation = None

    def close(self) -> None:
        """End the searcher loop (runs the operations generator's clean-up)."""
        if self._operations is not None:
            close = getattr(self._operations, "close", None)
            if close is not None:
                close()
            self._operations = None
