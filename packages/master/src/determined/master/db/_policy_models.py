"""The table of config policies (``_core/_config_policies``): per workload type, one global row
and at most one row per workspace, each with an invariant config and constraints (JSON or NULL)."""

from __future__ import annotations

import datetime
from typing import Any

from sqlalchemy import JSON, DateTime, ForeignKey, Index, Integer, String, text
from sqlalchemy.orm import Mapped, mapped_column

from determined.master.db._models import Base, utcnow


class TaskConfigPolicy(Base):
    """The config policies of one scope (a workspace, or global when ``workspace_id`` is NULL)
    for one workload type (``EXPERIMENT`` or ``NTSC``)."""

    __tablename__ = "task_config_policies"
    __table_args__ = (
        # NULLs are distinct in a unique index: the global rows need a partial index of their own.
        Index(
            "ix_task_config_policies_global",
            "workload_type",
            unique=True,
            sqlite_where=text("workspace_id IS NULL"),
            postgresql_where=text("workspace_id IS NULL"),
        ),
        Index("ix_task_config_policies_workspace", "workspace_id", "workload_type", unique=True),
    )
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    workspace_id: Mapped[int | None] = mapped_column(
        ForeignKey("workspaces.id", ondelete="CASCADE"), nullable=True
    )
    workload_type: Mapped[str] = mapped_column(String(16))
    last_updated_by: Mapped[int | None] = mapped_column(
        ForeignKey("users.id", ondelete="SET NULL"), nullable=True
    )
    last_updated_time: Mapped[datetime.datetime] = mapped_column(
        DateTime(timezone=True), default=utcnow
    )
    invariant_config: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    """Fields forced onto every submitted config of the scope (the submitted values lose)."""
    constraints: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    """Limits a submitted config must keep (``priority_limit``, ``resources.max_slots``)."""
