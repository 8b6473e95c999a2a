"""The table of log-policy matches: which policy of an experiment's ``log_policies`` a trial's output
matched, so the decision after the trial fails (no retry, or not on that node) survives a master
restart. The name of the last named policy matched is also kept on the trial (``runs``)."""

from __future__ import annotations

import datetime

from sqlalchemy import DateTime, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from determined.master.db._models import Base, utcnow


class LogPolicyMatch(Base):
    """The first line of one allocation of a task that matched one policy's pattern."""

    __tablename__ = "log_policy_matches"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    task_id: Mapped[str] = mapped_column(String(128), index=True)
    allocation_id: Mapped[str] = mapped_column(String(160), default="")
    """The allocation whose output matched ('' when a task shipped the line without one)."""
    policy_name: Mapped[str | None] = mapped_column(String(255), nullable=True)
    regex: Mapped[str] = mapped_column(Text)
    action: Mapped[str] = mapped_column(String(32), default="")
    """``cancel_retries``, ``exclude_node`` or '' (a policy that only names what matched)."""
    triggering_log: Mapped[str] = mapped_column(Text, default="")
    matched_at: Mapped[datetime.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    __table_args__ = (
        UniqueConstraint(
            "task_id", "allocation_id", "regex", "action", name="uq_log_policy_matches_key"
        ),
    )
