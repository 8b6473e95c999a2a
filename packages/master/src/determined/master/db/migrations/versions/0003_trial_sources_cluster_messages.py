"""trial source infos (checkpoint and model-version metrics) and cluster-wide messages

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-25 12:40:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "trial_source_infos",
        sa.Column("trial_id", sa.Integer(), nullable=False),
        sa.Column("checkpoint_uuid", sa.String(length=64), nullable=False),
        sa.Column("trial_source_info_type", sa.String(length=64), nullable=False),
        sa.Column("model_id", sa.Integer(), nullable=True),
        sa.Column("model_version", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(["trial_id"], ["runs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("trial_id", "checkpoint_uuid"),
    )
    op.create_index(
        "ix_trial_source_infos_checkpoint_uuid",
        "trial_source_infos",
        ["checkpoint_uuid"],
        unique=False,
    )
    op.create_index(
        "ix_trial_source_infos_model_version",
        "trial_source_infos",
        ["model_id", "model_version"],
        unique=False,
    )
    op.create_table(
        "cluster_messages",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("created_by", sa.Integer(), nullable=True),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("start_time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("end_time", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_time", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )


def downgrade() -> None:
    op.drop_table("cluster_messages")
    op.drop_index("ix_trial_source_infos_model_version", table_name="trial_source_infos")
    op.drop_index("ix_trial_source_infos_checkpoint_uuid", table_name="trial_source_infos")
    op.drop_table("trial_source_infos")
