"""How far a reader following an experiment's metric reports by id may read.

On PostgreSQL the metrics writer's lanes insert and commit at the same time. A report's id comes
from the table's sequence when its row is inserted, so a transaction that commits late can hold
ids below those of rows another lane already committed: a reader that reads the ids above the
newest it has seen (``_metric_series``) would skip those rows for good.

Each lane's transaction records, before it inserts, its floor: the newest id taken so far (its
own ids will all be higher). A reader first reads the newest id taken, then the floors in flight,
and reads ids up to the lowest of them (the horizon). No row is skipped: a row at or below the
horizon that the reader's query misses has not committed when the query starts; its id was taken
before the reader's first read (it is at most that id), so its transaction had recorded its floor
before the reader looked at the floors and was still in flight then; the horizon is at most that
floor, below the row's id, which contradicts the row being at or below it.

Lanes no longer wait for one another to insert and commit in id order, and the express lane's
single reports do not wait for a home lane's large insert (what bounded a transaction's size:
benchmarks/RESULTS.md, "Lanes that commit in any order").
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import weakref
from collections.abc import Iterator

import sqlalchemy
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

LAST_ID_SQL = (
    "SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM metrics_id_seq"
)
"""The newest id taken from ``metrics.id``'s sequence (PostgreSQL; 0 before the first): not
transactional, so it counts ids of transactions still in flight, and every id taken later is
higher. A lane reads it with its first statement (a round trip fewer under load)."""
_LAST_ID = sqlalchemy.text(LAST_ID_SQL)


class Horizon:
    """The floors of one database's lane transactions in flight."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._floors: dict[int, int] = {}
        self._tokens = itertools.count()

    @contextlib.contextmanager
    def inserting(self, floor: int) -> Iterator[None]:
        """Around a transaction's metric inserts and its commit; ``floor``: :data:`LAST_ID_SQL`
        read in the transaction at any time before its inserts."""
        with self._lock:
            token = next(self._tokens)
            self._floors[token] = floor
        try:
            yield
        finally:
            with self._lock:
                del self._floors[token]

    def visible_up_to(self, session: Session) -> int:
        """The highest id a query run after this returns can read without skipping any row."""
        taken = int(session.execute(_LAST_ID).scalar_one())
        with self._lock:
            return min(taken, *self._floors.values()) if self._floors else taken


_HORIZONS: weakref.WeakKeyDictionary[Engine, Horizon] = weakref.WeakKeyDictionary()
_HORIZONS_LOCK = threading.Lock()


def track(engine: Engine) -> Horizon:
    """The horizon of ``engine``'s lane transactions (made by the writer that overlaps them)."""
    with _HORIZONS_LOCK:
        horizon = _HORIZONS.get(engine)
        if horizon is None:
            horizon = _HORIZONS[engine] = Horizon()
        return horizon


def engine_of(session: Session) -> Engine:
    bind = session.get_bind()
    return bind if isinstance(bind, Engine) else bind.engine


def visible_up_to(session: Session) -> int | None:
    """The id a follower's query on ``session`` may read up to; None: any (no lanes overlap)."""
    horizon = _HORIZONS.get(engine_of(session))
    return None if horizon is None else horizon.visible_up_to(session)
