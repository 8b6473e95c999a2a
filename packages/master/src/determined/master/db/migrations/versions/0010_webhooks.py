"""webhooks: tables webhooks, webhook_triggers, webhook_task_log_triggers, webhook_events_queue

Issue 25: upstream's webhooks (``_core/_webhooks.py``).

New tables only; no existing row changes.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-28 15:10:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "webhooks",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("webhook_type", sa.String(16), nullable=False),
        sa.Column("mode", sa.String(16), nullable=False),
        sa.Column(
            "workspace_id",
            sa.Integer(),
            sa.ForeignKey("workspaces.id", ondelete="CASCADE"),
            nullable=True,
        ),
    )
    op.create_index("ix_webhooks_workspace_id", "webhooks", ["workspace_id"])
    op.create_table(
        "webhook_triggers",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column(
            "webhook_id",
            sa.Integer(),
            sa.ForeignKey("webhooks.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("trigger_type", sa.String(32), nullable=False),
        sa.Column("condition", sa.JSON(), nullable=False),
    )
    op.create_index("ix_webhook_triggers_webhook_id", "webhook_triggers", ["webhook_id"])
    op.create_table(
        "webhook_task_log_triggers",
        sa.Column("task_id", sa.String(128), primary_key=True),
        sa.Column(
            "trigger_id",
            sa.Integer(),
            sa.ForeignKey("webhook_triggers.id", ondelete="CASCADE"),
            primary_key=True,
        ),
    )
    op.create_table(
        "webhook_events_queue",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_webhook_events_queue_created_at", "webhook_events_queue", ["created_at"])


def downgrade() -> None:
    op.drop_index("ix_webhook_events_queue_created_at", table_name="webhook_events_queue")
    op.drop_table("webhook_events_queue")
    op.drop_table("webhook_task_log_triggers")
    op.drop_index("ix_webhook_triggers_webhook_id", table_name="webhook_triggers")
    op.drop_table("webhook_triggers")
    op.drop_index("ix_webhooks_workspace_id", table_name="webhooks")
    op.drop_table("webhooks")
