"""metric tiles: downsampled per-trial metric series kept at write time, backfilled from metrics

Adds ``metric_tiles`` and ``metric_tile_series`` (see ``determined.master._core._metric_tiles``),
in place: no existing table changes. The tiles of existing trial groups are built from their
unarchived metric rows by 0016, the migration that gave the tiles their current layout (this one
backfilled them in the layout of its time until then).

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-25 17:30:00.000000
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def _trial_fk() -> sa.Column[Any]:
    return sa.Column(
        "trial_id", sa.Integer(), sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False
    )


def upgrade() -> None:
    point = sa.Float(precision=53)
    op.create_table(
        "metric_tiles",
        _trial_fk(),
        sa.Column("metric_group", sa.String(length=255), nullable=False),
        sa.Column("metric", sa.String(length=255), nullable=False),
        sa.Column("level", sa.SmallInteger(), autoincrement=False, nullable=False),
        sa.Column("bucket", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("n", sa.BigInteger(), nullable=False),
        sa.Column("first_x", sa.BigInteger(), nullable=False),
        sa.Column("first_y", point, nullable=False),
        sa.Column("last_x", sa.BigInteger(), nullable=False),
        sa.Column("last_y", point, nullable=False),
        sa.Column("min_x", sa.BigInteger(), nullable=False),
        sa.Column("min_y", point, nullable=False),
        sa.Column("max_x", sa.BigInteger(), nullable=False),
        sa.Column("max_y", point, nullable=False),
        sa.PrimaryKeyConstraint("trial_id", "metric_group", "metric", "level", "bucket"),
        sqlite_with_rowid=False,
    )
    op.create_table(
        "metric_tile_series",
        _trial_fk(),
        sa.Column("metric_group", sa.String(length=255), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("x_min", sa.BigInteger(), nullable=False),
        sa.Column("x_max", sa.BigInteger(), nullable=False),
        sa.Column("level_min", sa.SmallInteger(), nullable=False),
        sa.PrimaryKeyConstraint("trial_id", "metric_group"),
    )


def downgrade() -> None:
    op.drop_table("metric_tile_series")
    op.drop_table("metric_tiles")
