"""model registry: version numbers unique per model, last-updated time, lookup by checkpoint

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23 09:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("model_versions", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("last_updated_time", sa.DateTime(timezone=True), nullable=True)
        )
        batch_op.create_unique_constraint(
            "uq_model_versions_model_id_version", ["model_id", "version"]
        )
        batch_op.create_index(
            "ix_model_versions_checkpoint_uuid", ["checkpoint_uuid"], unique=False
        )
    op.execute("UPDATE model_versions SET last_updated_time = creation_time")


def downgrade() -> None:
    with op.batch_alter_table("model_versions", schema=None) as batch_op:
        batch_op.drop_index("ix_model_versions_checkpoint_uuid")
        batch_op.drop_constraint("uq_model_versions_model_id_version", type_="unique")
        batch_op.drop_column("last_updated_time")
