"""The table of tasks beyond trials: commands, TensorBoards, notebooks and shells (upstream's NTSC).

One row per task holds what the master needs to place it again and to describe it after it ended:
its kind, owner, command line, config, context tarball, proxy port and exit. The task's log lines
live in ``task_logs`` and its allocation in ``allocations`` like a trial's.
"""

from __future__ import annotations

import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Integer,
    LargeBinary,
    String,
    Text,
)
from sqlalchemy.orm import Mapped, mapped_column

from determined.master.db._models import Base, utcnow


class NtscTask(Base):
    """A command, TensorBoard, notebook or shell and its one allocation."""

    __tablename__ = "ntsc_tasks"
    task_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    allocation_id: Mapped[str] = mapped_column(String(160))
    kind: Mapped[str] = mapped_column(String(32), index=True)
    owner_id: Mapped[int] = mapped_column(ForeignKey("users.id"))
    description: Mapped[str] = mapped_column(Text, default="")
    state: Mapped[str] = mapped_column(String(32), default="QUEUED")
    ready: Mapped[bool] = mapped_column(Boolean, default=False)
    argv: Mapped[list[Any]] = mapped_column(JSON, default=list)
    env: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    config: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    extra: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    context: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    resource_pool: Mapped[str] = mapped_column(String(64), default="default")
    slots: Mapped[int] = mapped_column(Integer, default=0)
    priority: Mapped[int] = mapped_column(Integer, default=42)
    idle_timeout: Mapped[float | None] = mapped_column(Float, nullable=True)
    proxied: Mapped[bool] = mapped_column(Boolean, default=False)
    address: Mapped[str | None] = mapped_column(String(255), nullable=True)
    port: Mapped[int | None] = mapped_column(Integer, nullable=True)
    start_time: Mapped[datetime.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    end_time: Mapped[datetime.datetime | None] = mapped_column(
        DateTime(timezone=True), nullable=True
    )
    last_activity: Mapped[datetime.datetime | None] = mapped_column(
        DateTime(timezone=True), nullable=True
    )
    exit_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    exit_status: Mapped[str | None] = mapped_column(Text, nullable=True)
    user_session_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    workspace_id: Mapped[int] = mapped_column(Integer, default=1, server_default="1", index=True)
    """The workspace the task belongs to (its permissions are checked there); 1 = Uncategorized."""
