"""log policies: the matches of an experiment's ``log_policies`` and the name a trial matched

``log_policy_matches`` keeps the first line of each allocation that matched a policy (its action
decides whether the failed trial is retried, and on which node); ``runs.log_policy_matched`` holds
the name of the last named policy a trial's output matched (upstream's ``logPolicyMatched``).

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-28 15:10:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "log_policy_matches",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("task_id", sa.String(length=128), nullable=False),
        sa.Column("allocation_id", sa.String(length=160), nullable=False),
        sa.Column("policy_name", sa.String(length=255), nullable=True),
        sa.Column("regex", sa.Text(), nullable=False),
        sa.Column("action", sa.String(length=32), nullable=False),
        sa.Column("triggering_log", sa.Text(), nullable=False),
        sa.Column("matched_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint(
            "task_id", "allocation_id", "regex", "action", name="uq_log_policy_matches_key"
        ),
    )
    op.create_index(
        "ix_log_policy_matches_task_id", "log_policy_matches", ["task_id"], unique=False
    )
    op.add_column("runs", sa.Column("log_policy_matched", sa.String(length=255), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("log_policy_matched")
    op.drop_index("ix_log_policy_matches_task_id", table_name="log_policy_matches")
    op.drop_table("log_policy_matches")
