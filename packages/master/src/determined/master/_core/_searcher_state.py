"""The searchers of running experiments, restored from and persisted to experiment snapshots."""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete
from sqlalchemy.orm import Session

from determined.master.db import Database, Experiment, ExperimentSnapshot, utcnow


class SearcherStates:
    """One live searcher per running experiment, and which experiments run without one.

    A searcher is built from the experiment's config and, after a master restart, restored from the
    ``searcher_state`` of the experiment's snapshot; :meth:`snapshot` persists it after every batch
    of actions.
    """

    def __init__(self, db: Database) -> None:
        self._db = db
        self.searchers: dict[int, Any] = {}
        self._continued: set[int] = set()
        """Experiments re-run by ``continue``: their trials no longer report to a searcher."""

    def is_continued(self, exp_id: int) -> bool:
        """Whether ``exp_id`` was re-run by ``continue`` (its trials bypass the searcher)."""
        return exp_id in self._continued

    def set_continued(self, exp_id: int, continued: bool) -> None:
        """Mark ``exp_id`` as re-run by ``continue`` (True) or done with that (False)."""
        if continued:
            self._continued.add(exp_id)
        else:
            self._continued.discard(exp_id)

    def of(self, exp: Experiment) -> Any:
        """The experiment's searcher, restored from its snapshot on first use."""
        searcher = self.searchers.get(exp.id)
        if searcher is None:
            from determined.master.searchers import Searcher

            searcher = Searcher(exp.config)
            with self._db.read() as session:
                snap = session.get(ExperimentSnapshot, exp.id)
                if snap is not None and snap.content.get("searcher_state") is not None:
                    searcher.load_state_dict(snap.content["searcher_state"])
            self.searchers[exp.id] = searcher
        return searcher

    def create(self, exp: Experiment) -> Any:
        """A fresh searcher for a new experiment."""
        from determined.master.searchers import Searcher

        searcher = Searcher(exp.config)
        self.searchers[exp.id] = searcher
        return searcher

    def snapshot(self, session: Session, exp: Experiment) -> None:
        """Persist the searcher's state and the experiment's progress in the open transaction."""
        searcher = self.searchers.get(exp.id)
        if searcher is None:
            return
        try:
            exp.progress = float(searcher.progress())
        except Exception:
            pass
        content = {"searcher_state": searcher.state_dict()}
        snap = session.get(ExperimentSnapshot, exp.id)
        if snap is None:
            session.add(ExperimentSnapshot(experiment_id=exp.id, content=content, version=6))
        else:
            snap.content = content
            snap.updated_at = utcnow()

    def forget(self, session: Session, exp_id: int) -> None:
        """Drop a finished experiment's searcher and its snapshot."""
        session.execute(
            delete(ExperimentSnapshot).where(ExperimentSnapshot.experiment_id == exp_id)
        )
        self.searchers.pop(exp_id, None)
