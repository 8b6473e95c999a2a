"""metric tiles stored 8 buckets to a row, rebuilt from the metric rows

``metric_tiles`` held one row per tile (bucket); it now holds one row per *chunk* of 8
consecutive buckets of one metric and level, the tiles column by column as JSON (see
``determined.master._core._metric_tiles``). Young trials wrote more tile rows than metric rows,
and each doubling of a trial's x range rewrote all its tile rows; chunks make both a few rows.

The table is recreated and every trial group's tiles are built again from its unarchived metric
rows (``_metric_tiles.backfill``: 3.8 s per 10^6 metric rows on SQLite, measured; so about six
minutes for 10^8). ``metric_tile_series`` is emptied and rebuilt with them.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-30 00:30:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def _key() -> list[sa.Column[object]]:
    return [
        sa.Column(
            "trial_id",
            sa.Integer(),
            sa.ForeignKey("runs.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("metric_group", sa.String(length=255), nullable=False),
        sa.Column("metric", sa.String(length=255), nullable=False),
        sa.Column("level", sa.SmallInteger(), autoincrement=False, nullable=False),
    ]


def upgrade() -> None:
    op.drop_table("metric_tiles")
    op.create_table(
        "metric_tiles",
        *_key(),
        sa.Column("chunk", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("trial_id", "metric_group", "metric", "level", "chunk"),
    )
    op.execute("DELETE FROM metric_tile_series")
    from determined.master._core import _metric_tiles

    _metric_tiles.backfill(op.get_bind())


_OLD_POINTS = ("first_x", "first_y", "last_x", "last_y", "min_x", "min_y", "max_x", "max_y")


def downgrade() -> None:
    point = sa.Float(precision=53)
    op.drop_table("metric_tiles")
    op.create_table(
        "metric_tiles",
        *_key(),
        sa.Column("bucket", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("n", sa.BigInteger(), nullable=False),
        *(
            sa.Column(name, sa.BigInteger() if name.endswith("_x") else point, nullable=False)
            for name in _OLD_POINTS
        ),
        sa.PrimaryKeyConstraint("trial_id", "metric_group", "metric", "level", "bucket"),
        sqlite_with_rowid=False,
    )
    op.execute("DELETE FROM metric_tile_series")  # the old layout's tiles are not rebuilt
