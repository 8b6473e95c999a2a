"""The searcher's append-only event log (see ``_core/_searcher_state.py``).

Each row is one transaction's worth of searcher calls of one experiment, in call order, as a JSON
list; ``seq`` numbers them per experiment. The experiment's snapshot (``experiment_snapshots``)
names the last ``seq`` it includes, and rows up to it are deleted when the log is compacted.
"""

from __future__ import annotations

import datetime

from sqlalchemy import DateTime, ForeignKey, Index, Integer, Text
from sqlalchemy.orm import Mapped, mapped_column

from determined.master.db._models import Base


class SearcherEvent(Base):
    """One batch of searcher calls of an experiment, appended in the transaction that made them."""

    __tablename__ = "searcher_events"
    __table_args__ = (Index("ix_searcher_events_experiment_seq", "experiment_id", "seq"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    experiment_id: Mapped[int] = mapped_column(
        ForeignKey("experiments.id", ondelete="CASCADE"), nullable=False
    )
    seq: Mapped[int] = mapped_column(Integer, nullable=False)
    events: Mapped[str] = mapped_column(Text, nullable=False)
    """JSON list of ``[kind, *args]`` calls (kinds in ``_core/_searcher_journal.py``)."""
    created_at: Mapped[datetime.datetime | None] = mapped_column(
        DateTime(timezone=True), nullable=True
    )
    """Unset by the master (the log is written on its hot path); for manual inspection only."""
