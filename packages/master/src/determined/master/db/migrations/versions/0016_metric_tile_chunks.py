"""metric tiles stored 8 buckets to a row

``metric_tiles`` held one row per tile (bucket); it now holds one row per *chunk* of 8
consecutive buckets of one metric and level, the tiles column by column as JSON (see
``determined.master._core._metric_tiles``). Young trials wrote more tile rows than metric rows,
and each doubling of a trial's x range rewrote all its tile rows; chunks make both a few rows.

The stored tiles are converted as they are (the levels and buckets did not change, only how a row
holds them): the work grows with the tile rows (at most ~550 per trial, metric and group), not
with the metric rows. Trial groups that have metric rows but no tiles (a database that came from
before 0007, which no longer backfills) are built from their unarchived metric rows
(``_metric_tiles.backfill``: 3.8 s per 10^6 metric rows on SQLite, measured).

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


_OLD = "metric_tiles_0015"
_OLD_POINTS = ("first_x", "first_y", "last_x", "last_y", "min_x", "min_y", "max_x", "max_y")
_COLUMNS = "trial_id, metric_group, metric, level, bucket, n, " + ", ".join(_OLD_POINTS)


def upgrade() -> None:
    bind = op.get_bind()
    op.rename_table("metric_tiles", _OLD)
    if bind.dialect.name == "postgresql":  # the primary key's index keeps its name: free it
        op.execute(f"ALTER INDEX metric_tiles_pkey RENAME TO {_OLD}_pkey")
    op.create_table(
        "metric_tiles",
        *_key(),
        sa.Column("chunk", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("trial_id", "metric_group", "metric", "level", "chunk"),
    )
    _convert(bind)
    op.drop_table(_OLD)
    from determined.master._core import _metric_tiles

    _metric_tiles.backfill(bind)  # groups without tiles: a database from before 0007


def _convert(bind: sa.Connection) -> None:
    """Every stored tile into its chunk, read in key order (a server-side cursor on PostgreSQL)
    and written a few thousand chunks at a time."""
    from determined.master._core import _metric_tiles
    from determined.master._core._tile_columns import CHUNK_BITS

    rows = bind.exec_driver_sql(
        f"SELECT {_COLUMNS} FROM {_OLD} ORDER BY trial_id, metric_group, metric, level, bucket",
        execution_options={"stream_results": True, "yield_per": 20_000},
    )
    chunks: list[tuple[tuple[int, str, str, int, int], list[list[object]]]] = []
    key = None
    columns: list[list[object]] = []
    for trial_id, group, metric, level, bucket, *tile in rows:
        at = (trial_id, group, metric, level, bucket >> CHUNK_BITS)
        if at != key:
            if len(chunks) >= 2_000:
                _metric_tiles.write_chunks(bind, chunks)
                chunks = []
            key, columns = at, [[] for _ in range(2 + len(_OLD_POINTS))]  # bucket, n, points
            chunks.append((at, columns))
        columns[0].append(bucket)
        for column, value in zip(columns[1:], tile, strict=True):
            column.append(value)
    rows.close()
    _metric_tiles.write_chunks(bind, chunks)


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
