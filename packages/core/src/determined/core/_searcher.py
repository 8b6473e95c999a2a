"""SearcherContext: the Core API guide's hyperparameter-search loop.

``for op in core_context.searcher.operations(): train to op.length; op.report_completed(metric)``.
Each operation is an absolute training length for this trial.

On a det master the operations come from the experiment's searcher (upstream 0.37's protocol,
which 0.38 dropped): ASHA hands out its rung lengths one after the other and stops the loop early
for a trial it does not promote; the other searchers hand out one operation of the full length
(``searcher.max_time``, or the legacy ``max_length``). ``op.report_completed(metric)`` reports the
searcher metric, which ASHA ranks at that rung. Against a master without the protocol, and
off-cluster, there is one operation: the configured length on-cluster (upstream 0.38's behaviour),
1 off-cluster.
"""

from __future__ import annotations

import enum
import logging
import math
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from determined.client import NextOperation
    from determined.core._api import TrialAPI
    from determined.core._distributed import DistributedContext

logger = logging.getLogger("determined.core")

_SHARED_ERRORS: dict[str, type[Exception]] = {
    "ValueError": ValueError,
    "TypeError": TypeError,
    "RuntimeError": RuntimeError,
}
"""Errors of the chief's searcher loop that workers re-raise as the same type (others: RuntimeError)."""


class SearcherMode(enum.Enum):
    """Which ranks iterate over ``operations()``."""

    WorkersAskChief = "WORKERS_ASK_CHIEF"
    ChiefOnly = "CHIEF_ONLY"


class Unit(enum.Enum):
    """The unit of a searcher length."""

    EPOCHS = "EPOCHS"
    RECORDS = "RECORDS"
    BATCHES = "BATCHES"


class SearcherOperationsAPI(Protocol):
    """Where on-cluster operations come from (``determined.client.MasterClient`` answers it)."""

    def get_searcher_operation(self, trial_id: int) -> int | None: ...

    def complete_searcher_operation(
        self, trial_id: int, length: int, searcher_metric: float
    ) -> NextOperation | None: ...


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
        """Mark the operation done with the value of the searcher metric; chief only, once.

        On a det master the value goes to the experiment's searcher (ASHA ranks the trial with
        it at this length), so it must be a number and not NaN there.
        """
        if not self._is_chief:
            raise RuntimeError("op.report_completed() may only be called on the chief")
        if self._completed:
            raise RuntimeError("op.report_completed() may only be called once per operation")
        value = self._context._check_metric(searcher_metric)
        self._completed = True
        self._context._report_progress(self._length)
        self._context._complete(self._length, value)


class SearcherContext:
    """The searcher as seen by training code.

    Args:
        backend: reports progress.
        distributed: this process's DistributedContext.
        trial_id: the trial.
        max_length: the configured full length (for progress, and the single operation when the
            master hands out none); ``None`` when the experiment configures none.
        units: the unit of ``max_length``, when known.
        operations: on-cluster, the master that hands out operations; ``None`` gives one operation
            of ``max_length``.
    """

    def __init__(
        self,
        backend: TrialAPI,
        distributed: DistributedContext,
        trial_id: int,
        max_length: int | None,
        units: Unit | None = None,
        operations: SearcherOperationsAPI | None = None,
    ) -> None:
        self._backend = backend
        self._dist = distributed
        self._trial_id = trial_id
        self._max_length = max_length
        self._units = units
        self._operations = operations
        self._given: NextOperation | None = None
        """The next operation the master gave with the last completed one (then no question)."""

    def operations(
        self, searcher_mode: SearcherMode = SearcherMode.WorkersAskChief, auto_ack: bool = True
    ) -> Iterator[SearcherOperation]:
        """Yield the searcher's operations for this trial until it needs no more.

        With ``WorkersAskChief`` (the default) every rank must iterate in step: the chief asks the
        master and broadcasts each operation's length, and the end of the loop; with
        ``ChiefOnly`` only the chief may iterate. Call ``op.report_completed()`` on each operation
        before asking for the next.
        """
        searcher_mode = SearcherMode(searcher_mode)
        is_chief = self._dist.rank == 0
        if searcher_mode == SearcherMode.ChiefOnly and not is_chief:
            raise RuntimeError(
                "searcher.operations() with ChiefOnly may only be called on the chief"
            )
        share = searcher_mode == SearcherMode.WorkersAskChief and self._dist.size > 1
        if not is_chief:
            yield from self._worker_operations()
            return
        handed_out = 0
        while True:
            try:
                length = self._next_length(handed_out)
            except Exception as exc:
                if share:
                    self._dist.broadcast(("error", (type(exc).__name__, str(exc))))
                raise
            if share:
                self._dist.broadcast(("op", length))
            if length is None:
                return
            op = SearcherOperation(self, length, True)
            handed_out += 1
            yield op
            if not op._completed:
                raise RuntimeError(
                    "you must call op.report_completed() on each operation before the next"
                )

    def _worker_operations(self) -> Iterator[SearcherOperation]:
        while True:
            kind, value = self._dist.broadcast(None)
            if kind == "error":
                # the same kind of error as the chief's, so every rank can handle it alike
                name, message = value
                error = _SHARED_ERRORS.get(name, RuntimeError)
                raise error(f"searcher.operations() failed on the chief: {name}: {message}")
            if value is None:
                return
            yield SearcherOperation(self, int(value), False)

    def _next_length(self, handed_out: int) -> int | None:
        """The chief's next operation length, or None at the end of the loop."""
        if self._operations is not None:
            from determined.client import APIError, NotFoundError

            given, self._given = self._given, None
            if given is not None:
                return given.length
            try:
                return self._operations.get_searcher_operation(self._trial_id)
            except NotFoundError:
                if handed_out:
                    raise
                logger.info(
                    "the master hands out no searcher operations; training to the configured "
                    "length in one operation"
                )
                self._operations = None
            except APIError as exc:
                if exc.status == 400:
                    raise ValueError(f"searcher.operations(): {exc.message}") from None
                raise
        if handed_out:
            return None
        if self._max_length is None:
            raise ValueError(
                "searcher.operations() needs a training length: set searcher.max_length (or, for "
                "ASHA searchers, searcher.max_time) in the experiment config"
            )
        return self._max_length

    def acknowledge_out_of_ops(self) -> None:
        """Kept for compatibility; nothing to do."""

    def get_configured_units(self) -> Unit | None:
        return self._units

    def _report_progress(self, length: float) -> None:
        if self._max_length:
            progress = min(max(float(length) / self._max_length, 0.0), 1.0)
            self._backend.report_progress(self._trial_id, progress)

    def _check_metric(self, searcher_metric: Any) -> Any:
        """The searcher metric to send: a float for the master (not NaN, as upstream 0.37);
        anything off-cluster, where it only reaches the log (as upstream 0.38)."""
        if self._operations is None:
            return searcher_metric
        if isinstance(searcher_metric, bool):
            raise TypeError(f"searcher_metric: must be a number, got {searcher_metric!r}")
        try:
            value = float(searcher_metric)
        except (TypeError, ValueError):
            raise TypeError(f"searcher_metric: must be a number, got {searcher_metric!r}") from None
        if math.isnan(value):
            raise RuntimeError("searcher_metric may not be NaN")
        return value

    def _complete(self, length: int, searcher_metric: Any) -> None:
        if self._operations is not None:
            self._given = self._operations.complete_searcher_operation(
                self._trial_id, length, searcher_metric
            )
        else:
            logger.debug("searcher operation of length %s completed: %s", length, searcher_metric)


def parse_max_length(searcher: dict[str, Any]) -> tuple[int | None, Unit | None]:
    """The operation length from a searcher config: ``max_length`` (int or ``{unit: n}``),
    ``max_time``, or pbt's ``length_per_round`` times ``num_rounds``."""
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
    rounds = searcher.get("num_rounds")
    if searcher.get("length_per_round") is not None and isinstance(rounds, int):
        # pbt: the longest a member trains (the searcher stops it after its last round)
        per_round = {
            "max_length": searcher["length_per_round"],
            "unit": searcher.get("time_metric"),
        }
        length, unit = parse_max_length(per_round)
        return (length * rounds if length is not None else None), unit
    return None, None
