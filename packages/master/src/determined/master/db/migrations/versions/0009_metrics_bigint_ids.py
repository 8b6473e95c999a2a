"""64-bit metric ids on PostgreSQL: ``metrics.id`` and the trial's validation ids become BIGINT

A 32-bit SERIAL id ends at 2^31 reports (about six hours of ingestion at 100,000 rows/s). SQLite's
``INTEGER PRIMARY KEY`` is 64-bit already, so nothing changes there. On PostgreSQL the column types and
the id sequence are widened (a one-off table rewrite; instant on a new database).

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-25 17:45:00.000000
"""

from __future__ import annotations

from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("ALTER TABLE metrics ALTER COLUMN id TYPE BIGINT")
    op.execute("ALTER SEQUENCE IF EXISTS metrics_id_seq AS BIGINT")
    op.execute(
        "ALTER TABLE runs ALTER COLUMN latest_validation_id TYPE BIGINT, "
        "ALTER COLUMN best_validation_id TYPE BIGINT"
    )


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(
        "ALTER TABLE runs ALTER COLUMN latest_validation_id TYPE INTEGER, "
        "ALTER COLUMN best_validation_id TYPE INTEGER"
    )
    op.execute("ALTER SEQUENCE IF EXISTS metrics_id_seq AS INTEGER")
    op.execute("ALTER TABLE metrics ALTER COLUMN id TYPE INTEGER")
