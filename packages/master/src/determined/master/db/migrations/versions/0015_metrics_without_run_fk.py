"""metric rows without a foreign key to their run, on PostgreSQL

Drops ``metrics_trial_id_fkey``. The check it made on every metric row (an index probe of ``runs``
and a row lock in the inserting transaction) was half of PostgreSQL's ``COPY`` cost per row
(``benchmarks/bench_pg_server_cost.py``) and gave nothing the writer does not already hold: each
batch is stored in the transaction that loaded (on a lane, locked) its trial's run, and an
experiment's deletion, the only place runs are deleted, deletes their metric rows itself after
locking the runs. SQLite keeps the constraint: dropping it there rebuilds the whole table, and its
cost there is small.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-29 09:00:00.000000
"""

from __future__ import annotations

from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE metrics DROP CONSTRAINT IF EXISTS metrics_trial_id_fkey")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "ALTER TABLE metrics ADD CONSTRAINT metrics_trial_id_fkey FOREIGN KEY (trial_id) "
            "REFERENCES runs (id) ON DELETE CASCADE"
        )
