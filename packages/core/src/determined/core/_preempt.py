"""PreemptContext: lets training code ask "should I stop now?" cheaply, in step across ranks."""

from __future__ import annotations

import enum
import logging
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from determined.core._api import TrialAPI
    from determined.core._distributed import DistributedContext
    from determined.core._preempt_sources import PreemptionSource

logger = logging.getLogger("determined.core")


class PreemptMode(enum.Enum):
    """Which ranks watch for preemption and how the answer is shared."""

    WorkersAskChief = "WORKERS_ASK_CHIEF"
    """Every rank calls ``should_preempt()`` in step; the chief's answer is broadcast (default)."""
    ChiefOnly = "CHIEF_ONLY"
    """Only the chief may call ``should_preempt()``."""
    WorkersAskMaster = "WORKERS_ASK_MASTER"
    """Every rank watches for itself; no communication between ranks."""


class PreemptContext:
    """Preemption signals for this process: SIGTERM, and on-cluster the master's decisions.

    Args:
        distributed: this process's DistributedContext.
        sources: where signals come from (from the ``det_preemption_sources`` hook); only ranks that
            watch (the chief, or every rank in WorkersAskMaster mode) start them.
        backend: used to acknowledge a signal.
        allocation_id: this task's allocation (for the acknowledgement).
        preempt_mode: see PreemptMode.
    """

    def __init__(
        self,
        distributed: DistributedContext,
        sources: list[PreemptionSource],
        backend: TrialAPI,
        allocation_id: str | None,
        preempt_mode: PreemptMode = PreemptMode.WorkersAskChief,
    ) -> None:
        self._dist = distributed
        self._backend = backend
        self._allocation_id = allocation_id
        self._mode = PreemptMode(preempt_mode)
        watches = self._mode == PreemptMode.WorkersAskMaster or distributed.rank == 0
        self._sources = sources if watches else []
        self._signal = threading.Event()
        self._started = False
        self._acknowledged = False

    def start(self) -> PreemptContext:
        if self._started:
            raise RuntimeError("PreemptContext.start() was already called")
        self._started = True
        for source in self._sources:
            source.start(self._signal.set)
        for source in self._sources:
            source.wait_ready(timeout=30)
        return self

    def close(self) -> None:
        for source in self._sources:
            source.close()

    def __enter__(self) -> PreemptContext:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def should_preempt(self, auto_ack: bool = True) -> bool:
        """True when training should checkpoint and exit (the trial will be resumed later).

        In WorkersAskChief mode every rank must call this in step. With ``auto_ack`` the first True
        acknowledges the signal to the master, which then treats a clean exit as a pause.
        """
        if not self._started:
            raise RuntimeError(
                "cannot call should_preempt() before the core context was started "
                "(use `with det.core.init() as core_context:` or call start())"
            )
        if self._mode == PreemptMode.ChiefOnly and self._dist.rank != 0:
            raise RuntimeError(
                "should_preempt() called from non-chief rank "
                f"{self._dist.rank} with preempt_mode=ChiefOnly"
            )
        if self._mode == PreemptMode.WorkersAskChief and self._dist.size > 1:
            answer = bool(
                self._dist.broadcast(self._signal.is_set() if self._dist.rank == 0 else None)
            )
        else:
            answer = self._signal.is_set()
        if (
            answer
            and auto_ack
            and (self._dist.rank == 0 or self._mode == PreemptMode.WorkersAskMaster)
        ):
            self.acknowledge_preemption_signal()
        return answer

    def acknowledge_preemption_signal(self) -> None:
        """Tell the master this trial will exit for the preemption (so exit 0 means "paused")."""
        if self._acknowledged:
            return
        self._acknowledged = True
        if self._allocation_id is not None:
            self._backend.ack_preemption(self._allocation_id)
