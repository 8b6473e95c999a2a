"""Reserved for webhooks (issue 25): filled in by the change that adds the tables.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-28 15:10:00.000000
"""

from __future__ import annotations

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
