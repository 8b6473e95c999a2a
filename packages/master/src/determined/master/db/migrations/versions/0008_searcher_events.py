"""searcher event log: ``searcher_events`` (append-only calls per experiment, compacted into
``experiment_snapshots``)

A new table only; no existing row changes. Snapshots written before it have no ``events_through``
and are read as including everything (there are no events for them).

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-25 17:30:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "searcher_events",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column(
            "experiment_id",
            sa.Integer(),
            sa.ForeignKey("experiments.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("events", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index(
        "ix_searcher_events_experiment_seq", "searcher_events", ["experiment_id", "seq"]
    )


def downgrade() -> None:
    op.drop_index("ix_searcher_events_experiment_seq", table_name="searcher_events")
    op.drop_table("searcher_events")
