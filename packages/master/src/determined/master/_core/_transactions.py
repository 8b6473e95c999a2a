"""The master's lifecycle transaction: one lock, one write session, effects run after the commit.

Every lifecycle change (experiments, trials, allocations, searcher state) runs inside
:meth:`Transactions.txn` and commits before anything is acknowledged. Calls into the resource manager,
preemption wake-ups and timers are queued with :meth:`Transactions.effect` and run only once the
transaction committed; a transaction that fails drops the effects it queued and runs the undos it
registered (:meth:`Transactions.undo`), so the master's memory agrees with the rows it rolled back.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import traceback
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

from sqlalchemy.orm import Session

from determined.master.db import Database

logger = logging.getLogger("determined.master")
T = TypeVar("T")


class Transactions:
    """The lifecycle lock, write sessions and after-commit effects of one master."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.lock = threading.RLock()
        """Held by every lifecycle transaction; reentrant, so a transaction may nest in another."""
        self._effects: list[Callable[[], None]] = []
        self._undos: list[Callable[[], None]] = []

    @contextlib.contextmanager
    def txn(self) -> Iterator[Session]:
        """Hold the lifecycle lock and a write session; run queued effects after the commit (after
        a failure: the undos registered in it, newest first)."""
        with self.lock:
            effects_before = len(self._effects)
            undos_before = len(self._undos)
            try:
                with self.db.write() as session:
                    yield session
            except BaseException:
                del self._effects[effects_before:]
                self._run_undos(undos_before)
                raise
            del self._undos[undos_before:]  # committed: nothing of it is undone any more
            self._flush()

    def batch(
        self,
        items: Sequence[T],
        apply: Callable[[Session, T], None],
        load: Callable[[Session, Sequence[T]], None] | None = None,
    ) -> None:
        """``apply(session, item)`` to every item in one transaction (``load(session, items)``
        first: what they all read, loaded together). Should that fail, its undos put the master's
        memory back as it was and each item is applied again in a transaction of its own, so one
        bad item fails alone (logged), as it would have on its own."""
        if len(items) > 1:
            try:
                with self.txn() as session:
                    if load is not None:
                        load(session, items)
                    for item in items:
                        apply(session, item)
                return
            except Exception:
                logger.warning(
                    "master: a batch of %d failed; applying each alone:\n%s",
                    len(items),
                    traceback.format_exc(),
                )
        for item in items:
            try:
                with self.txn() as session:
                    apply(session, item)
            except Exception:
                logger.error("master: applying %r failed:\n%s", item, traceback.format_exc())

    def effect(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` after the current transaction commits (never if it fails)."""
        self._effects.append(fn)

    def undo(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` should the current transaction fail: it reverts a change made in memory
        alongside the transaction's rows (an allocation forgotten or added)."""
        self._undos.append(fn)

    def _run_undos(self, first: int) -> None:
        while len(self._undos) > first:
            undo = self._undos.pop()
            try:
                undo()
            except Exception:
                logger.exception("master: undo failed")

    def _flush(self) -> None:
        while self._effects:
            effect = self._effects.pop(0)
            try:
                effect()
            except Exception:
                logger.exception("master: effect failed")
