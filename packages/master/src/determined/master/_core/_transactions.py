"""The master's lifecycle transaction: one lock, one write session, effects run after the commit.

Every lifecycle change (experiments, trials, allocations, searcher state) runs inside
:meth:`Transactions.txn` and commits before anything is acknowledged. Calls into the resource manager,
preemption wake-ups and timers are queued with :meth:`Transactions.effect` and run only once the
transaction committed; a transaction that fails drops the effects it queued.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator

from sqlalchemy.orm import Session

from determined.master.db import Database

logger = logging.getLogger("determined.master")


class Transactions:
    """The lifecycle lock, write sessions and after-commit effects of one master."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.lock = threading.RLock()
        """Held by every lifecycle transaction; reentrant, so a transaction may nest in another."""
        self._effects: list[Callable[[], None]] = []

    @contextlib.contextmanager
    def txn(self) -> Iterator[Session]:
        """Hold the lifecycle lock and a write session; run queued effects after the commit."""
        with self.lock:
            effects_before = len(self._effects)
            try:
                with self.db.write() as session:
                    yield session
            except BaseException:
                del self._effects[effects_before:]
                raise
            self._flush()

    def effect(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` after the current transaction commits (never if it fails)."""
        self._effects.append(fn)

    def _flush(self) -> None:
        while self._effects:
            effect = self._effects.pop(0)
            try:
                effect()
            except Exception:
                logger.exception("master: effect failed")
