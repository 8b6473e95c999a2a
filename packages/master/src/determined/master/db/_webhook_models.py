"""Webhooks (see ``_core/_webhooks.py``): the hooks and their triggers, the log-pattern triggers that
already fired per task, and the queue of events waiting to be delivered.

Names follow upstream's schema (``webhooks``, ``webhook_triggers``, ``webhook_task_log_triggers``,
``webhook_events_queue``).
"""

from __future__ import annotations

import datetime
from typing import Any

from sqlalchemy import JSON, DateTime, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from determined.master.db._models import Base, utcnow


class Webhook(Base):
    """A URL events are posted to: global (``workspace_id`` NULL) or one workspace's."""

    __tablename__ = "webhooks"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(255), default="")
    url: Mapped[str] = mapped_column(Text)
    webhook_type: Mapped[str] = mapped_column(String(16))
    """``DEFAULT`` (Determined's JSON event) or ``SLACK`` (a Slack message)."""
    mode: Mapped[str] = mapped_column(String(16), default="WORKSPACE")
    """``WORKSPACE``: every experiment in scope; ``SPECIFIC``: only experiments naming it in
    ``integrations.webhooks``."""
    workspace_id: Mapped[int | None] = mapped_column(
        ForeignKey("workspaces.id", ondelete="CASCADE"), nullable=True, index=True
    )


class WebhookTrigger(Base):
    """What fires a webhook: a trigger type and its condition (``{"state": ...}``,
    ``{"regex": ...}``)."""

    __tablename__ = "webhook_triggers"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    webhook_id: Mapped[int] = mapped_column(
        ForeignKey("webhooks.id", ondelete="CASCADE"), index=True
    )
    trigger_type: Mapped[str] = mapped_column(String(32))
    condition: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)


class WebhookTaskLogTrigger(Base):
    """A log-pattern trigger that already fired for a task (each fires once per task)."""

    __tablename__ = "webhook_task_log_triggers"
    task_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    trigger_id: Mapped[int] = mapped_column(
        ForeignKey("webhook_triggers.id", ondelete="CASCADE"), primary_key=True
    )


class WebhookEvent(Base):
    """An event waiting for delivery (deleted once delivered or given up on)."""

    __tablename__ = "webhook_events_queue"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    url: Mapped[str] = mapped_column(Text)
    payload: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    __table_args__ = (Index("ix_webhook_events_queue_created_at", "created_at"),)
