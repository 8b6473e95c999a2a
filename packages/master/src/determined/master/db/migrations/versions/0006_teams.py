"""teams: workspaces, projects, templates, user groups, role assignments, access-token and user fields

Seeds workspace 1 and project 1 (``Uncategorized``, immutable) and moves every experiment whose
project does not exist into project 1 and every model whose workspace does not exist into
workspace 1. Existing tables only gain columns and indexes (SQLite adds them in place: no table is
rebuilt, so no foreign-key cascade can fire on existing rows).

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-25 15:20:00.000000
"""

from __future__ import annotations

import datetime
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def _created_at() -> sa.Column[Any]:
    return sa.Column("created_at", sa.DateTime(timezone=True), nullable=False)


def _table(name: str, **extra: sa.types.TypeEngine[Any]) -> sa.TableClause:
    """A lightweight table of the seeded columns, typed so that JSON and datetimes bind right."""
    columns: dict[str, Any] = {
        "id": sa.Integer(),
        "name": sa.String(),
        "archived": sa.Boolean(),
        "immutable": sa.Boolean(),
        "user_id": sa.Integer(),
        "created_at": sa.DateTime(timezone=True),
        "state": sa.String(),
        "error_message": sa.Text(),
    } | extra
    return sa.table(name, *(sa.column(c, t) for c, t in columns.items()))


def upgrade() -> None:
    op.create_table(
        "workspaces",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("archived", sa.Boolean(), nullable=False),
        sa.Column("immutable", sa.Boolean(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=True),
        _created_at(),
        sa.Column("state", sa.String(length=32), nullable=False),
        sa.Column("error_message", sa.Text(), nullable=False),
        sa.Column("agent_user_group", sa.JSON(), nullable=True),
        sa.Column("checkpoint_storage_config", sa.JSON(), nullable=True),
        sa.Column("default_compute_pool", sa.String(length=255), nullable=False),
        sa.Column("default_aux_pool", sa.String(length=255), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name"),
    )
    op.create_table(
        "workspace_pins",
        sa.Column("workspace_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("pinned_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["workspace_id"], ["workspaces.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("workspace_id", "user_id"),
    )
    op.create_table(
        "projects",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("workspace_id", sa.Integer(), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("notes", sa.JSON(), nullable=False),
        sa.Column("archived", sa.Boolean(), nullable=False),
        sa.Column("immutable", sa.Boolean(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=True),
        _created_at(),
        sa.Column("state", sa.String(length=32), nullable=False),
        sa.Column("error_message", sa.Text(), nullable=False),
        sa.Column("key", sa.String(length=5), nullable=False),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="SET NULL"),
        sa.ForeignKeyConstraint(["workspace_id"], ["workspaces.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("key"),
        sa.UniqueConstraint("workspace_id", "name", name="uq_projects_workspace_name"),
    )
    op.create_index("ix_projects_workspace_id", "projects", ["workspace_id"], unique=False)
    op.create_table(
        "templates",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("workspace_id", sa.Integer(), server_default="1", nullable=False),
        _created_at(),
        sa.ForeignKeyConstraint(["workspace_id"], ["workspaces.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name"),
    )
    op.create_table(
        "groups",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("group_name", sa.String(length=255), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=True),
        _created_at(),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("group_name"),
    )
    op.create_table(
        "user_group_membership",
        sa.Column("group_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["group_id"], ["groups.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("group_id", "user_id"),
    )
    op.create_index(
        "ix_user_group_membership_user_id", "user_group_membership", ["user_id"], unique=False
    )
    op.create_table(
        "role_assignments",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("role_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=True),
        sa.Column("group_id", sa.Integer(), nullable=True),
        sa.Column("workspace_id", sa.Integer(), nullable=True),
        _created_at(),
        sa.CheckConstraint(
            "(user_id IS NULL) <> (group_id IS NULL)", name="ck_role_assignments_one_principal"
        ),
        sa.ForeignKeyConstraint(["group_id"], ["groups.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["workspace_id"], ["workspaces.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_role_assignments_user_id", "role_assignments", ["user_id"], unique=False)
    op.create_index("ix_role_assignments_group_id", "role_assignments", ["group_id"], unique=False)
    op.create_index(
        "ix_role_assignments_workspace_id", "role_assignments", ["workspace_id"], unique=False
    )
    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.add_column(sa.Column("agent_user_group", sa.JSON(), nullable=True))
    with op.batch_alter_table("user_sessions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("description", sa.Text(), server_default="", nullable=False))
    op.create_index(
        "ix_user_sessions_user_id_token_type",
        "user_sessions",
        ["user_id", "token_type"],
        unique=False,
    )
    with op.batch_alter_table("ntsc_tasks", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("workspace_id", sa.Integer(), server_default="1", nullable=False)
        )
    op.create_index("ix_ntsc_tasks_workspace_id", "ntsc_tasks", ["workspace_id"], unique=False)
    op.create_index("ix_experiments_project_id", "experiments", ["project_id"], unique=False)
    _seed()


def _seed() -> None:
    """The Uncategorized workspace and project; experiments, models and users moved into them."""
    bind = op.get_bind()
    now = datetime.datetime.now(datetime.timezone.utc)
    common = {
        "archived": False,
        "immutable": True,
        "user_id": None,
        "created_at": now,
        "state": "WORKSPACE_STATE_UNSPECIFIED",
        "error_message": "",
    }
    op.bulk_insert(
        _table("workspaces", default_compute_pool=sa.String(), default_aux_pool=sa.String()),
        [
            {"id": 1, "name": "Uncategorized", "default_compute_pool": "", "default_aux_pool": ""}
            | common
        ],
    )
    op.bulk_insert(
        _table(
            "projects",
            workspace_id=sa.Integer(),
            description=sa.Text(),
            notes=sa.JSON(),
            key=sa.String(),
        ),
        [
            {"id": 1, "name": "Uncategorized", "workspace_id": 1, "description": "", "notes": []}
            | {"key": "UNCAT"}
            | common
        ],
    )
    if bind.dialect.name == "postgresql":
        for table in ("workspaces", "projects"):
            op.execute(
                f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                f"(SELECT MAX(id) FROM {table}))"
            )
    op.execute(
        "UPDATE experiments SET project_id = 1 "
        "WHERE project_id IS NULL OR project_id NOT IN (SELECT id FROM projects)"
    )
    op.execute(
        "UPDATE models SET workspace_id = 1 "
        "WHERE workspace_id IS NULL OR workspace_id NOT IN (SELECT id FROM workspaces)"
    )


def downgrade() -> None:
    op.drop_index("ix_experiments_project_id", table_name="experiments")
    op.drop_index("ix_ntsc_tasks_workspace_id", table_name="ntsc_tasks")
    with op.batch_alter_table("ntsc_tasks", schema=None) as batch_op:
        batch_op.drop_column("workspace_id")
    op.drop_index("ix_user_sessions_user_id_token_type", table_name="user_sessions")
    with op.batch_alter_table("user_sessions", schema=None) as batch_op:
        batch_op.drop_column("description")
    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.drop_column("agent_user_group")
    op.drop_index("ix_role_assignments_workspace_id", table_name="role_assignments")
    op.drop_index("ix_role_assignments_group_id", table_name="role_assignments")
    op.drop_index("ix_role_assignments_user_id", table_name="role_assignments")
    op.drop_table("role_assignments")
    op.drop_index("ix_user_group_membership_user_id", table_name="user_group_membership")
    op.drop_table("user_group_membership")
    op.drop_table("groups")
    op.drop_table("templates")
    op.drop_index("ix_projects_workspace_id", table_name="projects")
    op.drop_table("projects")
    op.drop_table("workspace_pins")
    op.drop_table("workspaces")
