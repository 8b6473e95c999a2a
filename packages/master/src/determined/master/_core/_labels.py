"""Experiment labels one at a time, and every label in use (upstream's label routes).

``PUT``/``DELETE /api/v1/experiments/{id}/labels/{label}`` change one label in one lifecycle
transaction, so two clients adding different labels at once both keep theirs (a read-then-PATCH
would lose one). The config's ``labels`` stays equal to the column, as the PATCH route keeps it.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable

from sqlalchemy import select

from determined.master._core._experiments import get_experiment
from determined.master._core._transactions import Transactions
from determined.master.db import Database, Experiment
from determined.master.db._visibility import experiments_visible


class ExperimentLabels:
    """Add and remove one label of an experiment; list the labels of all experiments."""

    def __init__(self, transactions: Transactions, db: Database) -> None:
        self._transactions = transactions
        self._db = db

    def _change(self, exp_id: int, label: str, add: bool) -> list[str]:
        with self._transactions.txn() as session:
            exp = get_experiment(session, exp_id)
            labels = [x for x in (exp.labels or []) if x != label]
            if add:
                labels.append(label)
            if labels != list(exp.labels or []):
                exp.labels = labels
                exp.config = {**exp.config, "labels": labels}
            return labels

    def add(self, exp_id: int, label: str) -> list[str]:
        """Put ``label`` on the experiment (a no-op when there); its labels afterwards."""
        labels = self._labels_of(exp_id)
        if label in labels:
            return labels
        return self._change(exp_id, label, add=True)

    def remove(self, exp_id: int, label: str) -> list[str]:
        """Take ``label`` off the experiment (a no-op when absent); its labels afterwards."""
        return self._change(exp_id, label, add=False)

    def _labels_of(self, exp_id: int) -> list[str]:
        with self._db.read() as session:
            return list(get_experiment(session, exp_id).labels or [])

    def in_use(
        self, project_ids: Iterable[int] | None = None, workspace_ids: Iterable[int] | None = None
    ) -> list[str]:
        """Every label of an experiment that is not deleted, most used first (then by name);
        ``project_ids`` / ``workspace_ids`` limit it to those projects / workspaces."""
        stmt = select(Experiment.labels).where(Experiment.state != "DELETED")
        if workspace_ids is not None:
            stmt = stmt.where(experiments_visible(set(workspace_ids)))
        if project_ids is not None:
            stmt = stmt.where(Experiment.project_id.in_(list(project_ids)))
        counts: collections.Counter[str] = collections.Counter()
        with self._db.read() as session:
            for labels in session.scalars(stmt):
                counts.update(x for x in set(labels or []) if isinstance(x, str))
        return sorted(counts, key=lambda x: (-counts[x], x))
