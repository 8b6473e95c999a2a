"""Trials that wait for their proxy ports: a fixed ``environment.proxy_ports`` port held by another
running allocation on the same machine makes the next trial wait instead of failing to bind.

Trials have no network namespace of their own here, so a search whose trials all serve one fixed
port takes turns. A waiting launch is retried every second; a stop meanwhile ends it unlaunched.
"""

from __future__ import annotations

import queue
import threading
from typing import Any

from sqlalchemy.orm import Session

from determined.master._core._allocations import AllocState
from determined.master._core._launch_rows import LaunchedRun
from determined.master._core._proxy_ports import ProxyPorts, ProxyService
from determined.master._core._task_logs import master_log
from determined.master._core._transactions import Transactions


class PortWaits:
    """The allocations waiting for proxy ports (logged once each) and the retry of their launch."""

    def __init__(
        self,
        proxy_ports: ProxyPorts,
        rm: Any,
        events: queue.Queue[Any],
        transactions: Transactions,
    ) -> None:
        self._proxy_ports = proxy_ports
        self._rm = rm
        self._events = events
        self._transactions = transactions
        self._waiting: set[str] = set()

    def discard(self, allocation_id: str) -> None:
        """Forget an allocation (it launched or exited)."""
        self._waiting.discard(allocation_id)

    def busy(
        self,
        session: Session,
        alloc: AllocState,
        run: LaunchedRun,
        services: list[ProxyService],
        request: Any,
        assignment: Any,
    ) -> bool:
        """Whether one of the trial's proxy ``services`` is held by another allocation on its
        machine; if so the launch is queued again in a second (``_assigned`` on the events queue),
        or, if the trial was asked to stop meanwhile, it exits cleanly without having run. The
        wait's log line goes in ``session`` (the launch's lifecycle transaction)."""
        aid = alloc.allocation_id
        held = self._proxy_ports.held_by_others(services)
        if not held:
            self._waiting.discard(aid)
            return False
        effect = self._transactions.effect  # the RM and the queue hear of it once the claim commits
        if alloc.preempt:
            alloc.acked = True  # a clean stop: it never ran
            effect(lambda: self._rm.release(aid))
            effect(lambda: self._events.put(("_exited", (aid, 0, None))))
            return True
        if aid not in self._waiting:
            self._waiting.add(aid)
            ports = ", ".join(f"{s.port} (task {s.task_id})" for s in held)
            master_log(
                session,
                run.task_id,
                f"Trial {run.id} waits for proxy ports held on {held[0].address}: {ports}",
                allocation_id=aid,
            )
        retry = threading.Timer(1.0, self._events.put, (("_assigned", (request, assignment)),))
        retry.daemon = True
        effect(retry.start)
        return True
