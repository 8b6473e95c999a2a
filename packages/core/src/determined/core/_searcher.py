"""SearcherContext: the Core API guide's hyperparameter-search loop.

``for op in core_context.searcher.operations(): train to op.length; op.report_completed(metric)``.
Each operation is a training length for this trial. Today every trial gets one operation whose length
is the experiment's ``searcher.max_length`` (or ``max_time`` for ASHA searchers); off-cluster the length
is 1 unless ``core.init()`` was given a searcher config.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from determined.core._api import TrialAPI
    from determined.core._distributed import DistributedContext

logger = logging.getLogger("determined.core")


class SearcherMode(enum.Enum):
    """Which ranks iterate over ``operations()``."""

    WorkersAskChief = "WORKERS_ASK_CHIEF"
    ChiefOnly = "CHIEF_ONLY"


class Unit(enum.Enum):
    """The unit of a searcher length."""

    EPOCHS = "EPOCHS"
    RECORDS = "RECORDS"
    BATCHES = "BATCHES"


class SearcherOperation:
    """One unit of work from the searcher: train until ``length``, then report the searcher metric."""

    def __init__(self, context: SearcherContext, length: int, is_chief: bool) -> None:
        self._context = context
        self._length = length
        self._is_chief = is_chief
        self._completed = False

    @property
    def length(self) -> int:
        """The absolute training length (in the searcher's units) this operation asks for."""
        return self._length

    def report_progress(self, length: float) -> None:
        """Report how far training got (in the same units as ``length``); chief only."""
        if not self._is_chief:
            raise RuntimeError("op.report_progress() may only be called on the chief")
        if self._completed and length != self._length:
            raise RuntimeError("op.report_progress() called after op.report_completed()")
        self._context._report_progress(length)

    def report_completed(self, searcher_metric: Any) -> None:
        """Mark the operation done with the value of the searcher metric; chief only, once."""
        if not self._is_chief:
            raise RuntimeError("op.report_completed() may only be called on the chief")
        if self._completed:
            raise RuntimeError("op.report_completed() may only be called once per operation")
        self._completed = True
        self._context._report_progress(self._length)
        logger.debug("searcher operation of length %s completed: %s", self._length, searcher_metric)


class SearcherContext:
    """The searcher as seen by training code.

    Args:
        backend: reports progress.
        distributed: this process's DistributedContext.
        trial_id: the trial.
        max_length: the operation length, or ``None`` when the experiment configures none (then
            ``operations()`` raises a clear error).
        units: the unit of ``max_length``, when known.
    """

    def __init__(
        self,
        backend: TrialAPI,
        distributed: DistributedContext,
        trial_id: int,
        max_length: int | None,
        units: Unit | None = None,
    ) -> None:
        self._backend = backend
        self._dist = distributed
        self._trial_id = trial_id
        self._max_length = max_length
        self._units = units

    def operations(
        self, searcher_mode: SearcherMode = SearcherMode.WorkersAskChief, auto_ack: bool = True
    ) -> Iterator[SearcherOperation]:
        """Yield the searcher's operations for this trial; every rank must iterate in step
        (``WorkersAskChief``), or only the chief (``ChiefOnly``)."""
        searcher_mode = SearcherMode(searcher_mode)
        is_chief = self._dist.rank == 0
        if searcher_mode == SearcherMode.ChiefOnly and not is_chief:
            raise RuntimeError(
                "searcher.operations() with ChiefOnly may only be called on the chief"
            )
        if self._max_length is None:
            raise ValueError(
                "searcher.operations() needs a training length: set searcher.max_length (or, for "
                "ASHA searchers, searcher.max_time) in the experiment config"
            )
        share = searcher_mode == SearcherMode.WorkersAskChief and self._dist.size > 1
        length: int | None = self._max_length if is_chief else None
        if share:
            length = self._dist.broadcast(length)
        assert length is not None
        op = SearcherOperation(self, length, is_chief)
        yield op
        if is_chief and not op._completed:
            raise RuntimeError(
                "you must call op.report_completed() on each operation before the next"
            )
        if share:
            self._dist.broadcast(None)  # the end of the operations, for the workers' loops

    def acknowledge_out_of_ops(self) -> None:
        """Kept for compatibility; nothing to do."""

    def get_configured_units(self) -> Unit | None:
        return self._units

    def _report_progress(self, length: float) -> None:
        if self._max_length:
            progress = min(max(float(length) / self._max_length, 0.0), 1.0)
            self._backend.report_progress(self._trial_id, progress)


def parse_max_length(searcher: dict[str, Any]) -> tuple[int | None, Unit | None]:
    """The operation length from a searcher config: ``max_length`` (int or ``{unit: n}``) or ``max_time``."""
    max_length = searcher.get("max_length")
    if isinstance(max_length, dict) and len(max_length) == 1:
        ((unit, value),) = max_length.items()
        return int(value), Unit[str(unit).upper()] if str(
            unit
        ).upper() in Unit.__members__ else None
    if isinstance(max_length, int) and not isinstance(max_length, bool):
        unit_name = str(searcher.get("unit") or "").upper()
        return max_length, Unit[unit_name] if unit_name in Unit.__members__ else None
    max_time = searcher.get("max_time")
    if isinstance(max_time, int) and not isinstance(max_time, bool):
        unit_name = str(searcher.get("time_metric") or "").upper()
        return max_time, Unit[unit_name] if unit_name in Unit.__members__ else None
    return None, None
