"""Tables of teams sharing a master: workspaces, projects, templates, user groups and role assignments.

Workspace 1 and project 1 are the immutable ``Uncategorized`` pair that migration 0006 seeds; every
experiment without a project lands in project 1 (``experiments.project_id`` defaults to 1). Roles
are upstream's built-in ones, referred to by upstream's numeric ids (see :data:`BUILTIN_ROLE_IDS`);
a role assignment names a user or a group and a workspace (``workspace_id`` NULL = cluster-wide).
"""

from __future__ import annotations

import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    CheckConstraint,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from determined.master.db._models import Base, utcnow

DEFAULT_WORKSPACE_ID = 1
"""The ``Uncategorized`` workspace: immutable, cannot be deleted, archived or renamed."""
DEFAULT_PROJECT_ID = 1
"""The ``Uncategorized`` project of workspace 1: where experiments without a project land."""
UNCATEGORIZED = "Uncategorized"

BUILTIN_ROLE_IDS: dict[str, int] = {
    "ClusterAdmin": 1,
    "WorkspaceAdmin": 2,
    "WorkspaceCreator": 3,
    "Viewer": 4,
    "Editor": 5,
    "ModelRegistryViewer": 6,
    "EditorRestricted": 7,
    "GenAIUser": 8,
    "EditorProjectRestricted": 9,
    "TokenCreator": 10,
}
"""Upstream's built-in roles and the ids its ``roles`` table gives them."""


class Workspace(Base):
    """A named collection of projects, with optional defaults for the experiments inside it."""

    __tablename__ = "workspaces"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(255), unique=True)
    archived: Mapped[bool] = mapped_column(Boolean, default=False)
    immutable: Mapped[bool] = mapped_column(Boolean, default=False)
    user_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    """The creator (NULL for the seeded ``Uncategorized`` workspace)."""
    created_at: Mapped[datetime.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    state: Mapped[str] = mapped_column(String(32), default="WORKSPACE_STATE_UNSPECIFIED")
    error_message: Mapped[str] = mapped_column(Text, default="")
    agent_user_group: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    """``{agentUid, agentGid, agentUser, agentGroup}`` the workspace's tasks run as, or NULL."""
    checkpoint_storage_config: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    """A ``checkpoint_storage`` config for experiments whose own config has none, or NULL."""
    default_compute_pool: Mapped[str] = mapped_column(String(255), default="")
    default_aux_pool: Mapped[str] = mapped_column(String(255), default="")


class WorkspacePin(Base):
    """A user's pin of a workspace (``pinned`` and ``pinnedAt`` are per user)."""

    __tablename__ = "workspace_pins"
    workspace_id: Mapped[int] = mapped_column(
        ForeignKey("workspaces.id", ondelete="CASCADE"), primary_key=True
    )
    user_id: Mapped[int] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), primary_key=True
    )
    pinned_at: Mapped[datetime.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Project(Base):
    """A named collection of experiments inside a workspace; names are unique per workspace."""

    __tablename__ = "projects"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(255))
    workspace_id: Mapped[int] = mapped_column(ForeignKey("workspaces.id", ondelete="CASCADE"))
    description: Mapped[str] = mapped_column(Text, default="")
    notes: Mapped[list[Any]] = mapped_column(JSON, default=list)
    """Upstream's ``Note`` list: ``[{"name": ..., "contents": ...}, ...]``."""
    archived: Mapped[bool] = mapped_column(Boolean, default=False)
    immutable: Mapped[bool] = mapped_column(Boolean, default=False)
    user_id: Mapped[int | None] = mapped_column(
        ForeignKey("users.id", ondelete="SET NULL"), nullable=True
    )
    """The creator (NULL for the seeded ``Uncategorized`` project)."""
    created_at: Mapped[datetime.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    state: Mapped[str] = mapped_column(String(32), default="WORKSPACE_STATE_UNSPECIFIED")
    error_message: Mapped[str] = mapped_column(Text, default="")
    key: Mapped[str] = mapped_column(String(5), unique=True)
    """Upstream's short project key (up to 5 characters, unique), used in run names."""
    __table_args__ = (
        UniqueConstraint("workspace_id", "name", name="uq_projects_workspace_name"),
        Index("ix_projects_workspace_id", "workspace_id"),
    )


class Template(Base):
    """A named config template merged under an experiment's config (``det e create --template``)."""

    __tablename__ = "templates"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(255), unique=True)
    config: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    workspace_id: Mapped[int] = mapped_column(
        ForeignKey("workspaces.id", ondelete="CASCADE"),
        default=DEFAULT_WORKSPACE_ID,
        server_default=str(DEFAULT_WORKSPACE_ID),
    )
    created_at: Mapped[datetime.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Group(Base):
    """A user group (``det user-group``); roles assigned to it apply to each member."""

    __tablename__ = "groups"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column("group_name", String(255), unique=True)
    user_id: Mapped[int | None] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), nullable=True
    )
    """Upstream's personal-group marker (the group of one user); NULL for ordinary groups."""
    created_at: Mapped[datetime.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class GroupMembership(Base):
    """A user's membership of a group."""

    __tablename__ = "user_group_membership"
    group_id: Mapped[int] = mapped_column(
        ForeignKey("groups.id", ondelete="CASCADE"), primary_key=True
    )
    user_id: Mapped[int] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), primary_key=True
    )
    __table_args__ = (Index("ix_user_group_membership_user_id", "user_id"),)


class RoleAssignment(Base):
    """A built-in role given to one user or one group, in one workspace or cluster-wide."""

    __tablename__ = "role_assignments"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    role_id: Mapped[int] = mapped_column(Integer)
    """One of :data:`BUILTIN_ROLE_IDS`' values."""
    user_id: Mapped[int | None] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), nullable=True
    )
    group_id: Mapped[int | None] = mapped_column(
        ForeignKey("groups.id", ondelete="CASCADE"), nullable=True
    )
    workspace_id: Mapped[int | None] = mapped_column(
        ForeignKey("workspaces.id", ondelete="CASCADE"), nullable=True
    )
    """NULL: the assignment is cluster-wide."""
    created_at: Mapped[datetime.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    __table_args__ = (
        CheckConstraint(
            "(user_id IS NULL) <> (group_id IS NULL)", name="ck_role_assignments_one_principal"
        ),
        Index("ix_role_assignments_user_id", "user_id"),
        Index("ix_role_assignments_group_id", "group_id"),
        Index("ix_role_assignments_workspace_id", "workspace_id"),
    )


UserGroup = Group
"""Another name of :class:`Group` (both are in use)."""
UserGroupMembership = GroupMembership
"""Another name of :class:`GroupMembership`."""
