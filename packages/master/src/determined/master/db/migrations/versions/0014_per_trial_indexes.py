"""per-trial indexes: a trial's allocations, the live ones, a task's run, an experiment's best trial

Adds ``ix_allocations_trial_id``, ``ix_allocations_state``, ``ix_runs_task_id`` and
``ix_runs_experiment_metric``. Without them every query that joined allocations to runs (an
experiment's ``ASSIGNED``/``RUNNING`` state, the cluster view, usage) and every checkpoint report
(its run found by task id) read a whole table that gains a row with every trial, so each trial of a
long search cost more than the one before; and every read of an experiment ranked all its trials to
find the best one.
``tests/master/test_query_plans.py`` checks that no per-trial statement scans such a table.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-29 01:00:00.000000
"""

from __future__ import annotations

from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_allocations_trial_id", "allocations", ["trial_id"])
    op.create_index("ix_allocations_state", "allocations", ["state"])
    op.create_index("ix_runs_task_id", "runs", ["task_id"])
    op.create_index(
        "ix_runs_experiment_metric", "runs", ["experiment_id", "searcher_metric_value", "id"]
    )


def downgrade() -> None:
    op.drop_index("ix_runs_experiment_metric", table_name="runs")
    op.drop_index("ix_runs_task_id", table_name="runs")
    op.drop_index("ix_allocations_state", table_name="allocations")
    op.drop_index("ix_allocations_trial_id", table_name="allocations")
