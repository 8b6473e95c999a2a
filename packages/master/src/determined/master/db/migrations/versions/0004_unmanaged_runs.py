"""unmanaged experiments and trials (core_v2): the unmanaged flag and external ids

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-25 12:45:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("experiments", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("unmanaged", sa.Boolean(), nullable=False, server_default=sa.false())
        )
        batch_op.add_column(
            sa.Column("external_experiment_id", sa.String(length=255), nullable=True)
        )
        batch_op.create_unique_constraint(
            "uq_experiments_external_experiment_id", ["external_experiment_id"]
        )
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("external_trial_id", sa.String(length=255), nullable=True))
        batch_op.create_unique_constraint(
            "uq_runs_experiment_external_trial", ["experiment_id", "external_trial_id"]
        )


def downgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_constraint("uq_runs_experiment_external_trial", type_="unique")
        batch_op.drop_column("external_trial_id")
    with op.batch_alter_table("experiments", schema=None) as batch_op:
        batch_op.drop_constraint("uq_experiments_external_experiment_id", type_="unique")
        batch_op.drop_column("external_experiment_id")
        batch_op.drop_column("unmanaged")
