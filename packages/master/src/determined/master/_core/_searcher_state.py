"""The searchers of running experiments, persisted as an event log with periodic snapshots.

Persisting a search must not cost more as it grows. Every lifecycle transaction that called a
searcher appends the calls it made (``_searcher_journal``) as one row of ``searcher_events``: a
few hundred bytes, whatever the size of the search. Once the log since the last snapshot is long
(``max(compact_min, 2 * trials created)`` calls, so the snapshot's cost, which grows with the
trials, is spread over as many calls), it is compacted: the whole state goes into the experiment's
snapshot, which names the last event row it includes, and the rows up to it are deleted, in the
same transaction. A restarted master rebuilds the searcher from the config, loads the snapshot and
replays the rows after it: the exact state of the last committed transaction.

Search methods that cannot be replayed cheaply and exactly (a third-party plugin that does not say
it can: ``SearchMethod.supports_replay = True``; e.g. det-plugin-optuna, whose samplers keep their
own state) are persisted as before: the whole snapshot after every batch of actions.
"""

from __future__ import annotations

import json
import os
import time
from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import delete, event, insert, select
from sqlalchemy.orm import Session

from determined.master._core._searcher_journal import JournaledSearcher
from determined.master.db import Database, Experiment, ExperimentSnapshot, utcnow
from determined.master.db._searcher_models import SearcherEvent

if TYPE_CHECKING:
    from sqlalchemy import Table

COMPACT_MIN_EVENTS = 1000
"""Fewest calls in the log before it is compacted into a snapshot."""
COMPACT_ENV = "DET_MASTER_SEARCHER_COMPACT_EVENTS"
"""Set to N: compact after exactly N calls (tests); ``0``: no event log, a snapshot every time."""
PROGRESS_INTERVAL_S = 0.2
"""Long searches recompute the experiment's progress (a pass over the trials) at most this often."""
PROGRESS_EVERY_CALL_TRIALS = 100
"""Up to this many trials, progress is recomputed after every batch of actions."""
SNAPSHOT_VERSION = 6


def _builtin_method_types() -> tuple[type, ...]:
    from determined.master.searchers import (
        AdaptiveASHASearch,
        AsyncHalvingSearch,
        GridSearch,
        PBTSearch,
        RandomSearch,
    )

    return (AdaptiveASHASearch, AsyncHalvingSearch, GridSearch, PBTSearch, RandomSearch)


_INSERT = insert(cast("Table", SearcherEvent.__table__))
_WATCHED = "det_searcher_logs"
_PENDING = "det_searcher_pending"


def _watch(session: Session, log: _Log) -> None:
    """Mark ``log`` stale should ``session`` roll back (see :func:`_rolled_back`)."""
    watched = session.info.get(_WATCHED)
    if watched is None:
        session.info[_WATCHED] = watched = []
    watched.append(log)


@event.listens_for(Session, "before_commit")
def _write_pending(session: Session) -> None:
    """Write the searcher calls the transaction recorded (:meth:`SearcherStates.record`)."""
    pending: dict[int, SearcherStates] | None = session.info.pop(_PENDING, None)
    for exp_id, states in (pending or {}).items():
        states._append(session, exp_id)


@event.listens_for(Session, "after_rollback")
def _rolled_back(session: Session) -> None:
    session.info.pop(_PENDING, None)
    for log in session.info.pop(_WATCHED, None) or ():
        log.stale = True


@event.listens_for(Session, "after_commit")
def _committed(session: Session) -> None:
    session.info.pop(_WATCHED, None)


class _Log:
    """Where one experiment's event log stands."""

    __slots__ = ("progress_at", "replayable", "seq", "since_snapshot", "stale")

    def __init__(self, replayable: bool) -> None:
        self.replayable = replayable
        self.seq = 0
        """The last event row written (or replayed)."""
        self.since_snapshot = 0
        """Calls in the log after the snapshot."""
        self.stale = False
        """A transaction that wrote this log rolled back: the live searcher is ahead of the
        database and is rebuilt from it on next use."""
        self.progress_at = 0.0


class SearcherStates:
    """One live searcher per running experiment, and which experiments run without one.

    A searcher is built from the experiment's config and, after a master restart, restored from
    its snapshot and event log (module docstring); :meth:`snapshot` persists it after every batch
    of actions.

    Args:
        db: the master's database.
        compact_every: compact after exactly this many calls (``0``: snapshot every time, no log);
            ``None``: ``DET_MASTER_SEARCHER_COMPACT_EVENTS``, else the adaptive default.
    """

    def __init__(self, db: Database, compact_every: int | None = None) -> None:
        self._db = db
        self.searchers: dict[int, Any] = {}
        self._logs: dict[int, _Log] = {}
        self._continued: set[int] = set()
        """Experiments re-run by ``continue``: their trials no longer report to a searcher."""
        if compact_every is None and os.environ.get(COMPACT_ENV, "").strip():
            compact_every = int(os.environ[COMPACT_ENV])
        self._compact_every = compact_every
        self.compactions = 0
        """Compactions since this master started (tests, benchmarks)."""

    def is_continued(self, exp_id: int) -> bool:
        """Whether ``exp_id`` was re-run by ``continue`` (its trials bypass the searcher)."""
        return exp_id in self._continued

    def set_continued(self, exp_id: int, continued: bool) -> None:
        """Mark ``exp_id`` as re-run by ``continue`` (True) or done with that (False)."""
        if continued:
            self._continued.add(exp_id)
        else:
            self._continued.discard(exp_id)

    # ------------------------------------------------------------------------------------------
    # building and restoring

    def _build(self, exp: Experiment) -> JournaledSearcher:
        searcher = JournaledSearcher(exp.config)
        builtin = type(searcher.method) in _builtin_method_types()
        if builtin:
            searcher.trim_metrics()
        replayable = self._compact_every != 0 and (
            builtin or getattr(searcher.method, "supports_replay", False) is True
        )
        self._logs[exp.id] = _Log(replayable)
        return searcher

    def of(self, exp: Experiment) -> Any:
        """The experiment's searcher, restored from its snapshot and event log on first use."""
        searcher = self.loaded(exp.id)
        if searcher is None:  # never loaded, or its last calls' transaction rolled back: reload
            searcher = self._restore(exp)
            self.searchers[exp.id] = searcher
        return searcher

    def loaded(self, exp_id: int) -> Any:
        """The experiment's searcher if it is in memory and current (not stale: the transaction
        that wrote its last calls committed), else None (then :meth:`of` restores it): lets a read
        answer from it without loading the experiment row."""
        searcher = self.searchers.get(exp_id)
        log = self._logs.get(exp_id)
        if searcher is None or log is None or log.stale:
            return None
        return searcher

    def _restore(self, exp: Experiment) -> JournaledSearcher:
        searcher = self._build(exp)
        log = self._logs[exp.id]
        with self._db.read() as session:
            snap = session.get(ExperimentSnapshot, exp.id)
            through = 0
            if snap is not None and snap.content.get("searcher_state") is not None:
                searcher.load_state_dict(snap.content["searcher_state"])
                through = int(snap.content.get("events_through") or 0)
            rows = session.execute(
                select(SearcherEvent.seq, SearcherEvent.events)
                .where(SearcherEvent.experiment_id == exp.id, SearcherEvent.seq > through)
                .order_by(SearcherEvent.seq)
            ).all()
        log.seq = through
        for seq, text in rows:
            events = json.loads(text)
            searcher.replay(events)
            log.seq = seq
            log.since_snapshot += len(events)
        return searcher

    def create(self, exp: Experiment) -> Any:
        """A fresh searcher for a new experiment."""
        searcher = self._build(exp)
        self.searchers[exp.id] = searcher
        return searcher

    # ------------------------------------------------------------------------------------------
    # persisting

    def snapshot(self, session: Session, exp: Experiment) -> None:
        """Persist the searcher's new calls and the experiment's progress in the open transaction
        (compacting the log into the snapshot when it is long; see the module docstring)."""
        searcher = self.searchers.get(exp.id)
        log = self._logs.get(exp.id)
        if searcher is None or log is None:
            return
        self._update_progress(exp, searcher, log)
        self.record(session, exp.id)

    def record(self, session: Session, exp_id: int) -> None:
        """Persist the searcher's new calls in the open transaction, as :meth:`snapshot` does,
        without the experiment's progress: for calls that leave the progress as it was (a
        trial's first ``searcher/operation``), so no Experiment row need be loaded for them.

        The calls go in one row when the transaction commits: a transaction that handles several
        trials' exits, each a call of the same searcher, writes one row, not one per exit."""
        searcher = self.searchers.get(exp_id)
        log = self._logs.get(exp_id)
        if searcher is None or log is None:
            return
        if not log.replayable:
            # Exactly as before the log: the method may change state in calls not recorded.
            searcher.take_events()
            self._write_snapshot(session, exp_id, searcher, log)
            return
        pending = session.info.setdefault(_PENDING, {})
        if exp_id not in pending:
            pending[exp_id] = self
            _watch(session, log)

    def _append(self, session: Session, exp_id: int) -> None:
        """Write the calls :meth:`record` noted as one event row (the commit of ``session``, see
        :func:`_write_pending`); compact the log when it is long."""
        searcher = self.searchers.get(exp_id)
        log = self._logs.get(exp_id)
        if searcher is None or log is None:
            return  # forgotten in the same transaction (the experiment ended)
        events = searcher.take_events()
        if events:
            log.seq += 1
            log.since_snapshot += len(events)
            # Core, not ORM: one cached statement, no autoflush, no unit of work (~40 us).
            session.connection().execute(
                _INSERT,
                {
                    "experiment_id": exp_id,
                    "seq": log.seq,
                    "events": json.dumps(events, separators=(",", ":")),
                },
            )
        threshold = self._compact_every or max(COMPACT_MIN_EVENTS, 2 * len(searcher.trials_created))
        if log.since_snapshot >= threshold:
            self.compact(session, exp_id)

    def compact(self, session: Session, exp_id: int) -> None:
        """Write the whole state into the snapshot and drop the event rows it includes."""
        searcher = self.searchers.get(exp_id)
        log = self._logs.get(exp_id)
        if searcher is None or log is None:
            return
        searcher.take_events()  # included in the state written now
        self._write_snapshot(session, exp_id, searcher, log)
        session.execute(
            delete(SearcherEvent).where(
                SearcherEvent.experiment_id == exp_id, SearcherEvent.seq <= log.seq
            )
        )
        log.since_snapshot = 0
        self.compactions += 1

    def _write_snapshot(
        self, session: Session, exp_id: int, searcher: JournaledSearcher, log: _Log
    ) -> None:
        content = {"searcher_state": searcher.state_dict(), "events_through": log.seq}
        snap = session.get(ExperimentSnapshot, exp_id)
        if snap is None:
            session.add(
                ExperimentSnapshot(experiment_id=exp_id, content=content, version=SNAPSHOT_VERSION)
            )
        else:
            snap.content = content
            snap.updated_at = utcnow()
        _watch(session, log)

    def _update_progress(self, exp: Experiment, searcher: Any, log: _Log) -> None:
        now = time.monotonic()
        if (
            len(searcher.trials_created) > PROGRESS_EVERY_CALL_TRIALS
            and now - log.progress_at < PROGRESS_INTERVAL_S
        ):
            return
        log.progress_at = now
        try:
            exp.progress = float(searcher.progress())
        except Exception:
            pass

    def forget(self, session: Session, exp_id: int) -> None:
        """Drop a finished experiment's searcher, its snapshot and its event log."""
        session.execute(
            delete(ExperimentSnapshot).where(ExperimentSnapshot.experiment_id == exp_id)
        )
        session.execute(delete(SearcherEvent).where(SearcherEvent.experiment_id == exp_id))
        self.searchers.pop(exp_id, None)
        self._logs.pop(exp_id, None)
