"""config policies: the ``task_config_policies`` table (``_core/_config_policies``)

One row per scope (a workspace, or global when ``workspace_id`` is NULL) and workload type
(``EXPERIMENT`` / ``NTSC``) with its invariant config and constraints. No existing table changes.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-28 15:10:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "task_config_policies",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column(
            "workspace_id",
            sa.Integer(),
            sa.ForeignKey("workspaces.id", ondelete="CASCADE"),
            nullable=True,
        ),
        sa.Column("workload_type", sa.String(length=16), nullable=False),
        sa.Column(
            "last_updated_by",
            sa.Integer(),
            sa.ForeignKey("users.id", ondelete="SET NULL"),
            nullable=True,
        ),
        sa.Column("last_updated_time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("invariant_config", sa.JSON(), nullable=True),
        sa.Column("constraints", sa.JSON(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        "ix_task_config_policies_global",
        "task_config_policies",
        ["workload_type"],
        unique=True,
        sqlite_where=sa.text("workspace_id IS NULL"),
        postgresql_where=sa.text("workspace_id IS NULL"),
    )
    op.create_index(
        "ix_task_config_policies_workspace",
        "task_config_policies",
        ["workspace_id", "workload_type"],
        unique=True,
    )


def downgrade() -> None:
    op.drop_index("ix_task_config_policies_workspace", table_name="task_config_policies")
    op.drop_index("ix_task_config_policies_global", table_name="task_config_policies")
    op.drop_table("task_config_policies")
