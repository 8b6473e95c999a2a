"""agent state: the admins' enable/disable/drain switches on agents and slots

Adds ``agent_states`` and ``slot_states`` (see ``determined.master.db._agent_models``); no
existing table changes. An agent or slot without a row is enabled, as every one was before.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-28 15:10:00.000000
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def _switch_columns() -> list[sa.Column[Any]]:
    return [
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("draining", sa.Boolean(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    ]


def upgrade() -> None:
    op.create_table(
        "agent_states",
        sa.Column("agent_id", sa.String(length=255), nullable=False),
        *_switch_columns(),
        sa.PrimaryKeyConstraint("agent_id"),
    )
    op.create_table(
        "slot_states",
        sa.Column("agent_id", sa.String(length=255), nullable=False),
        sa.Column("slot_id", sa.Integer(), autoincrement=False, nullable=False),
        *_switch_columns(),
        sa.PrimaryKeyConstraint("agent_id", "slot_id"),
    )


def downgrade() -> None:
    op.drop_table("slot_states")
    op.drop_table("agent_states")
