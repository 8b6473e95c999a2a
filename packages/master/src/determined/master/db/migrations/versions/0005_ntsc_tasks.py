"""tasks beyond trials: commands, TensorBoards, notebooks and shells (ntsc_tasks)

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-25 14:50:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "ntsc_tasks",
        sa.Column("task_id", sa.String(length=128), nullable=False),
        sa.Column("allocation_id", sa.String(length=160), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("owner_id", sa.Integer(), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("state", sa.String(length=32), nullable=False),
        sa.Column("ready", sa.Boolean(), nullable=False),
        sa.Column("argv", sa.JSON(), nullable=False),
        sa.Column("env", sa.JSON(), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("extra", sa.JSON(), nullable=False),
        sa.Column("context", sa.LargeBinary(), nullable=True),
        sa.Column("resource_pool", sa.String(length=64), nullable=False),
        sa.Column("slots", sa.Integer(), nullable=False),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("idle_timeout", sa.Float(), nullable=True),
        sa.Column("proxied", sa.Boolean(), nullable=False),
        sa.Column("address", sa.String(length=255), nullable=True),
        sa.Column("port", sa.Integer(), nullable=True),
        sa.Column("start_time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("end_time", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_activity", sa.DateTime(timezone=True), nullable=True),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("exit_status", sa.Text(), nullable=True),
        sa.Column("user_session_id", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(["owner_id"], ["users.id"]),
        sa.PrimaryKeyConstraint("task_id"),
    )
    op.create_index("ix_ntsc_tasks_kind", "ntsc_tasks", ["kind"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_ntsc_tasks_kind", table_name="ntsc_tasks")
    op.drop_table("ntsc_tasks")
