"""Tables of the admins' switches on agents and their slots (``det agent|slot enable|disable``).

A row exists once an agent or slot was switched; an agent or slot without one is enabled. They
outlive a restart of the master, which applies them to its resource manager before it resumes
any work (see ``_core/_agent_states``).
"""

from __future__ import annotations

import datetime

from sqlalchemy import Boolean, DateTime, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from determined.master.db._models import Base, utcnow


class AgentState(Base):
    """Whether an agent takes new work (``enabled``) and, when not, whether it was drained
    (its running work left to finish) rather than disabled (its work killed)."""

    __tablename__ = "agent_states"
    agent_id: Mapped[str] = mapped_column(String(255), primary_key=True)
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    draining: Mapped[bool] = mapped_column(Boolean, default=False)
    updated_at: Mapped[datetime.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class SlotState(Base):
    """The same switch for one slot of an agent (slot ids are the agent's slot numbers)."""

    __tablename__ = "slot_states"
    agent_id: Mapped[str] = mapped_column(String(255), primary_key=True)
    slot_id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    draining: Mapped[bool] = mapped_column(Boolean, default=False)
    updated_at: Mapped[datetime.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
