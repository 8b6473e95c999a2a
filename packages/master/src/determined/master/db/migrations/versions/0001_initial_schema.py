"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-22 04:34:43.876417
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "allocations",
        sa.Column("allocation_id", sa.String(length=160), nullable=False),
        sa.Column("task_id", sa.String(length=128), nullable=False),
        sa.Column("trial_id", sa.Integer(), nullable=True),
        sa.Column("state", sa.String(length=32), nullable=False),
        sa.Column("slots", sa.Integer(), nullable=False),
        sa.Column("resource_pool", sa.String(length=64), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=True),
        sa.Column("start_time", sa.DateTime(timezone=True), nullable=True),
        sa.Column("end_time", sa.DateTime(timezone=True), nullable=True),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("exit_error", sa.Text(), nullable=True),
        sa.Column("preemption_requested", sa.Boolean(), nullable=False),
        sa.Column("preemption_acked", sa.Boolean(), nullable=False),
        sa.Column("is_ready", sa.Boolean(), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("allocation_id"),
    )
    with op.batch_alter_table("allocations", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_allocations_task_id"), ["task_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_allocations_token_hash"), ["token_hash"], unique=False)

    op.create_table(
        "checkpoints_v2",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("uuid", sa.String(length=64), nullable=False),
        sa.Column("task_id", sa.String(length=128), nullable=False),
        sa.Column("allocation_id", sa.String(length=160), nullable=True),
        sa.Column("report_time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("state", sa.String(length=32), nullable=False),
        sa.Column("resources", sa.JSON(), nullable=False),
        sa.Column("metadata", sa.JSON(), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("trial_id", sa.Integer(), nullable=True),
        sa.Column("experiment_id", sa.Integer(), nullable=True),
        sa.Column("storage_id", sa.Integer(), nullable=True),
        sa.Column("steps_completed", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("uuid"),
    )
    with op.batch_alter_table("checkpoints_v2", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_checkpoints_v2_experiment_id"), ["experiment_id"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_checkpoints_v2_trial_id"), ["trial_id"], unique=False)

    op.create_table(
        "cluster_id",
        sa.Column("cluster_id", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("cluster_id"),
    )
    op.create_table(
        "models",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("metadata", sa.JSON(), nullable=False),
        sa.Column("labels", sa.JSON(), nullable=False),
        sa.Column("notes", sa.Text(), nullable=False),
        sa.Column("archived", sa.Boolean(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=True),
        sa.Column("workspace_id", sa.Integer(), nullable=False),
        sa.Column("creation_time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_updated_time", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name"),
    )
    op.create_table(
        "storage_backend",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_table(
        "task_logs",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("task_id", sa.String(length=128), nullable=False),
        sa.Column("allocation_id", sa.String(length=160), nullable=True),
        sa.Column("agent_id", sa.String(length=64), nullable=True),
        sa.Column("container_id", sa.String(length=64), nullable=True),
        sa.Column("rank_id", sa.Integer(), nullable=True),
        sa.Column("timestamp", sa.DateTime(timezone=True), nullable=False),
        sa.Column("level", sa.String(length=32), nullable=True),
        sa.Column("log", sa.Text(), nullable=False),
        sa.Column("source", sa.String(length=32), nullable=True),
        sa.Column("stdtype", sa.String(length=16), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("task_logs", schema=None) as batch_op:
        batch_op.create_index("ix_task_logs_task_id", ["task_id", "id"], unique=False)

    op.create_table(
        "tasks",
        sa.Column("task_id", sa.String(length=128), nullable=False),
        sa.Column("task_type", sa.String(length=32), nullable=False),
        sa.Column("job_id", sa.String(length=64), nullable=False),
        sa.Column("start_time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("end_time", sa.DateTime(timezone=True), nullable=True),
        sa.Column("trial_id", sa.Integer(), nullable=True),
        sa.PrimaryKeyConstraint("task_id"),
    )
    with op.batch_alter_table("tasks", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_tasks_trial_id"), ["trial_id"], unique=False)

    op.create_table(
        "users",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("username", sa.String(length=255), nullable=False),
        sa.Column("display_name", sa.String(length=255), nullable=True),
        sa.Column("password_hash", sa.String(length=255), nullable=False),
        sa.Column("admin", sa.Boolean(), nullable=False),
        sa.Column("active", sa.Boolean(), nullable=False),
        sa.Column("remote", sa.Boolean(), nullable=False),
        sa.Column("modified_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_auth_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("username"),
    )
    op.create_table(
        "experiments",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("state", sa.String(length=32), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("original_config", sa.Text(), nullable=False),
        sa.Column("model_definition", sa.LargeBinary(), nullable=True),
        sa.Column("start_time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("end_time", sa.DateTime(timezone=True), nullable=True),
        sa.Column("archived", sa.Boolean(), nullable=False),
        sa.Column("parent_id", sa.Integer(), nullable=True),
        sa.Column("owner_id", sa.Integer(), nullable=False),
        sa.Column("project_id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.String(length=64), nullable=False),
        sa.Column("progress", sa.Float(), nullable=True),
        sa.Column("notes", sa.Text(), nullable=False),
        sa.Column("labels", sa.JSON(), nullable=False),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("weight", sa.Float(), nullable=False),
        sa.Column("max_slots", sa.Integer(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["owner_id"],
            ["users.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_table(
        "model_versions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("model_id", sa.Integer(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("checkpoint_uuid", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("comment", sa.Text(), nullable=False),
        sa.Column("notes", sa.Text(), nullable=False),
        sa.Column("labels", sa.JSON(), nullable=False),
        sa.Column("metadata", sa.JSON(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=True),
        sa.Column("creation_time", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["model_id"], ["models.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_table(
        "user_sessions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("expiry", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("token_type", sa.String(length=32), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("token_hash"),
    )
    op.create_table(
        "experiment_snapshots",
        sa.Column("experiment_id", sa.Integer(), nullable=False),
        sa.Column("content", sa.JSON(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["experiment_id"], ["experiments.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("experiment_id"),
    )
    op.create_table(
        "runs",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("experiment_id", sa.Integer(), nullable=False),
        sa.Column("request_id", sa.String(length=64), nullable=False),
        sa.Column("task_id", sa.String(length=128), nullable=False),
        sa.Column("state", sa.String(length=32), nullable=False),
        sa.Column("start_time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("end_time", sa.DateTime(timezone=True), nullable=True),
        sa.Column("hparams", sa.JSON(), nullable=False),
        sa.Column("seed", sa.BigInteger(), nullable=False),
        sa.Column("warm_start_checkpoint_uuid", sa.String(length=64), nullable=True),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("restarts", sa.Integer(), nullable=False),
        sa.Column("total_batches", sa.BigInteger(), nullable=False),
        sa.Column("summary_metrics", sa.JSON(), nullable=False),
        sa.Column("latest_validation_id", sa.Integer(), nullable=True),
        sa.Column("best_validation_id", sa.Integer(), nullable=True),
        sa.Column("searcher_metric_value", sa.Float(), nullable=True),
        sa.Column("runner_state", sa.String(length=255), nullable=False),
        sa.Column("metadata", sa.JSON(), nullable=False),
        sa.Column("early_stopped_by_searcher", sa.Boolean(), nullable=False),
        sa.Column("early_exit_reason", sa.String(length=64), nullable=True),
        sa.Column("progress", sa.Float(), nullable=True),
        sa.Column("last_activity", sa.DateTime(timezone=True), nullable=True),
        sa.Column("archived", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(["experiment_id"], ["experiments.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.create_index(
            "ix_runs_experiment_request", ["experiment_id", "request_id"], unique=False
        )

    op.create_table(
        "metrics",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("trial_id", sa.Integer(), nullable=False),
        sa.Column("trial_run_id", sa.Integer(), nullable=False),
        sa.Column("metric_group", sa.String(length=255), nullable=False),
        sa.Column("total_batches", sa.BigInteger(), nullable=False),
        sa.Column("end_time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("metrics", sa.JSON(), nullable=False),
        sa.Column("archived", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(["trial_id"], ["runs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("metrics", schema=None) as batch_op:
        batch_op.create_index(
            "ix_metrics_trial_group", ["trial_id", "metric_group", "total_batches"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("metrics", schema=None) as batch_op:
        batch_op.drop_index("ix_metrics_trial_group")

    op.drop_table("metrics")
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_index("ix_runs_experiment_request")

    op.drop_table("runs")
    op.drop_table("experiment_snapshots")
    op.drop_table("user_sessions")
    op.drop_table("model_versions")
    op.drop_table("experiments")
    op.drop_table("users")
    with op.batch_alter_table("tasks", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_tasks_trial_id"))

    op.drop_table("tasks")
    with op.batch_alter_table("task_logs", schema=None) as batch_op:
        batch_op.drop_index("ix_task_logs_task_id")

    op.drop_table("task_logs")
    op.drop_table("storage_backend")
    op.drop_table("models")
    op.drop_table("cluster_id")
    with op.batch_alter_table("checkpoints_v2", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_checkpoints_v2_trial_id"))
        batch_op.drop_index(batch_op.f("ix_checkpoints_v2_experiment_id"))

    op.drop_table("checkpoints_v2")
    with op.batch_alter_table("allocations", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_allocations_token_hash"))
        batch_op.drop_index(batch_op.f("ix_allocations_task_id"))

    op.drop_table("allocations")
