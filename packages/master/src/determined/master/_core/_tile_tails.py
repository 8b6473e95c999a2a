"""The chunks the metrics writer wrote last, kept so that the next batch of a trial needs no SELECT.

A trial reporting one step at a time continues the same ``metric_tiles`` chunk (8 buckets) with
every report: without this, each report read that chunk back before merging into it. Per trial and
metric group this keeps, for each metric and level, the last chunk written (its tile columns), with
the ``metric_tile_series`` state written beside it. A batch uses a kept chunk only when the state
it loads from the database is the one recorded: any other writer of a trial's tiles (a rollback's
rebuild, a promotion, :func:`determined.master._core._metric_tiles.store`, a deleted trial whose
id comes back) changes or removes that state, or forgets the trial here.

Entries are recorded when their transaction commits (a SQLAlchemy ``after_commit`` hook) and
dropped with it on a rollback, so they never hold what the database does not. At most
:data:`LIMIT_BYTES` of chunks (counted encoded) are kept, the least recently written trial groups
evicted.
"""

from __future__ import annotations

import collections
import threading
import weakref
from typing import Any

from sqlalchemy import Connection, Engine, event
from sqlalchemy.orm import Session

from determined.master._core._tile_build import Chunks

LIMIT_BYTES = 8 * 1024 * 1024
"""Chunk bytes kept at most, counted encoded (about 0.7 KiB per metric and level of a trial
group; as Python lists several times that)."""

State = tuple[int, int, int, int]
"""A trial group's ``metric_tile_series`` row: ``(run_id, x_min, x_max, level_min)``."""

_Key = tuple[str, int, str]
"""``(database, trial_id, metric_group)``: masters in one process (tests) keep apart."""
_PENDING = "det_tile_tails"
"""``Session.info`` key of the entries a transaction will record when it commits."""


class TileTails:
    """The last chunks written per trial group (thread-safe: the writer's lanes share it)."""

    def __init__(self, limit_bytes: int = LIMIT_BYTES) -> None:
        self._groups: collections.OrderedDict[_Key, tuple[State, Chunks, int]] = (
            collections.OrderedDict()
        )
        self._bytes = 0
        self._limit = limit_bytes
        self._lock = threading.Lock()

    def get(self, db: str, trial_id: int, group: str, state: State | None) -> Chunks:
        """The kept chunks of a trial group of database ``db`` whose stored state is ``state``
        (empty when the state differs from the one recorded with them: they may have changed)."""
        with self._lock:
            found = self._groups.get((db, trial_id, group))
            if found is None:
                return {}
            if found[0] != state:
                self._drop((db, trial_id, group))
                return {}
            return found[1]

    def forget(self, db: str, trial_id: int, group: str) -> None:
        """Drop what is kept of a trial group."""
        with self._lock:
            self._drop((db, trial_id, group))

    def record_on_commit(
        self, session: Session, key: _Key, before: State | None, after: State, written: Chunks
    ) -> None:
        """Record ``written`` (the chunks this transaction wrote to trial group ``key``, ``(db,
        trial_id, group)``, the highest per metric and level) with state ``after`` once
        ``session`` commits; ``before``: the state the transaction loaded (kept chunks recorded
        with it are carried over)."""
        session.info.setdefault(_PENDING, []).append((self, (key, before, after, written)))

    def _apply(self, entries: list[tuple[_Key, State | None, State, Chunks]]) -> None:
        with self._lock:
            for key, before, after, written in entries:
                found = self._groups.get(key)
                chunks: Chunks = {}
                if found is not None:
                    if found[0] == before:
                        chunks = dict(found[1])
                    self._drop(key)
                for name, entry in written.items():
                    kept = chunks.get(name)
                    if kept is None or kept[0] <= entry[0]:
                        chunks[name] = entry
                size = sum(entry[2] for entry in chunks.values())
                self._groups[key] = (after, chunks, size)
                self._bytes += size
            while self._bytes > self._limit and self._groups:
                self._drop(next(iter(self._groups)))

    def _drop(self, key: _Key) -> None:
        found = self._groups.pop(key, None)
        if found is not None:
            self._bytes -= found[2]


TAILS = TileTails()
"""The master's kept chunks (one per process: a trial's tiles have one writer)."""


@event.listens_for(Session, "after_commit")
def _committed(session: Session) -> None:
    pending: Any = session.info.pop(_PENDING, None)
    for tails in dict.fromkeys(owner for owner, _ in pending or ()):
        tails._apply([entry for owner, entry in pending if owner is tails])


@event.listens_for(Session, "after_rollback")
def _rolled_back(session: Session) -> None:
    session.info.pop(_PENDING, None)


def database_key(connection: Connection) -> str:
    """What tells one database from another in the keys (its URL, password hidden)."""
    engine = connection.engine
    key = _KEYS.get(engine)
    if key is None:
        key = _KEYS[engine] = str(engine.url)
    return key


_KEYS: weakref.WeakKeyDictionary[Engine, str] = weakref.WeakKeyDictionary()
