"""Workspaces: the resource client for ``/api/v1/workspaces/...``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from determined.client import _routes as r
from determined.client._session import Session

Params = Mapping[str, Any]


class WorkspacesClient:
    """One method per workspace endpoint; each returns the master's JSON answer (a workspace is
    upstream's ``v1Workspace``: ``id``, ``name``, ``archived``, ``immutable``, ``numProjects``,
    ``numExperiments``, ``pinned``, ``agentUserGroup``, ``checkpointStorageConfig``, ...)."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def list(self, params: Params | None = None) -> dict[str, Any]:
        """Workspaces the caller may see (``workspaces``, ``pagination``); ``name`` (any case),
        ``nameCaseSensitive``, ``archived``, ``pinned``, ``users``, ``userIds``, ``sortBy``
        (``SORT_BY_ID``/``SORT_BY_NAME``), ``orderBy``, ``offset``, ``limit`` as upstream."""
        return r.call(self.session, r.WORKSPACES_LIST, params=params)

    def create(
        self,
        name: str,
        *,
        agent_user_group: Mapping[str, Any] | None = None,
        checkpoint_storage_config: Mapping[str, Any] | None = None,
        default_compute_pool: str | None = None,
        default_aux_pool: str | None = None,
    ) -> dict[str, Any]:
        """A new workspace (``workspace``); ``agent_user_group`` is ``{agentUid, agentGid,
        agentUser, agentGroup}``, ``checkpoint_storage_config`` a ``checkpoint_storage`` section."""
        body: dict[str, Any] = {"name": name}
        if agent_user_group is not None:
            body["agentUserGroup"] = dict(agent_user_group)
        if checkpoint_storage_config is not None:
            body["checkpointStorageConfig"] = dict(checkpoint_storage_config)
        if default_compute_pool is not None:
            body["defaultComputePool"] = default_compute_pool
        if default_aux_pool is not None:
            body["defaultAuxPool"] = default_aux_pool
        return r.call(self.session, r.WORKSPACE_CREATE, body=body)

    def get(self, workspace_id: int) -> dict[str, Any]:
        """One workspace (``workspace``)."""
        return r.call(self.session, r.WORKSPACE_GET, workspace_id=workspace_id)

    def patch(
        self,
        workspace_id: int,
        *,
        name: str | None = None,
        agent_user_group: Mapping[str, Any] | None = None,
        checkpoint_storage_config: Mapping[str, Any] | None = None,
        default_compute_pool: str | None = None,
        default_aux_pool: str | None = None,
    ) -> dict[str, Any]:
        """Change the named settings (``{}`` clears the agent user/group or the checkpoint
        storage, ``""`` a default pool); the answer holds the new ``workspace``."""
        body: dict[str, Any] = {}
        if name is not None:
            body["name"] = name
        if agent_user_group is not None:
            body["agentUserGroup"] = dict(agent_user_group)
        if checkpoint_storage_config is not None:
            body["checkpointStorageConfig"] = dict(checkpoint_storage_config)
        if default_compute_pool is not None:
            body["defaultComputeResourcePool"] = default_compute_pool
        if default_aux_pool is not None:
            body["defaultAuxResourcePool"] = default_aux_pool
        return r.call(self.session, r.WORKSPACE_PATCH, body=body, workspace_id=workspace_id)

    def delete(self, workspace_id: int) -> dict[str, Any]:
        """Delete a workspace with its projects and their finished experiments (``completed``)."""
        return r.call(self.session, r.WORKSPACE_DELETE, workspace_id=workspace_id)

    def archive(self, workspace_id: int) -> dict[str, Any]:
        """Archive a workspace."""
        return r.call(self.session, r.WORKSPACE_ARCHIVE, workspace_id=workspace_id)

    def unarchive(self, workspace_id: int) -> dict[str, Any]:
        """Unarchive a workspace."""
        return r.call(self.session, r.WORKSPACE_UNARCHIVE, workspace_id=workspace_id)

    def pin(self, workspace_id: int) -> dict[str, Any]:
        """Pin a workspace for the calling user."""
        return r.call(self.session, r.WORKSPACE_PIN, workspace_id=workspace_id)

    def unpin(self, workspace_id: int) -> dict[str, Any]:
        """Unpin a workspace for the calling user."""
        return r.call(self.session, r.WORKSPACE_UNPIN, workspace_id=workspace_id)

    def projects(self, workspace_id: int, params: Params | None = None) -> dict[str, Any]:
        """The projects of a workspace, every visible one's for id 0 (``projects``,
        ``pagination``); ``name``, ``archived``, ``users``, ``sortBy``, ``orderBy``, ``offset``,
        ``limit`` as upstream."""
        return r.call(self.session, r.WORKSPACE_PROJECTS, params=params, workspace_id=workspace_id)

    def resource_pools(self, workspace_id: int, params: Params | None = None) -> dict[str, Any]:
        """The resource pools a workspace may use (``resourcePools``)."""
        return r.call(self.session, r.WORKSPACE_POOLS, params=params, workspace_id=workspace_id)

    def by_name(self, name: str) -> dict[str, Any] | None:
        """The workspace with exactly this name, or None."""
        found = self.list({"nameCaseSensitive": name}).get("workspaces") or []
        return found[0] if found else None
