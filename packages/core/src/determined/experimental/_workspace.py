"""``Workspace``: a named collection of projects (upstream's SDK class and its methods)."""

from __future__ import annotations

from typing import Any

from determined.client import Client, NotFoundError, Session
from determined.experimental._project import Project
from determined.experimental._util import read_paginated


class ResourcePool:
    """A resource pool a workspace may use (``Workspace.list_pools``).

    Attributes:
        name: the pool's name.
    """

    def __init__(self, session: Session, name: str = "") -> None:
        self._session = session
        self.name = name

    def __repr__(self) -> str:
        return f"ResourcePool(name={self.name!r})"


class Workspace:
    """A workspace, made from its id or its name (exactly one of them), as upstream's
    ``Workspace(session, workspace_id=None, workspace_name=None)``.

    Attributes (cached; :meth:`reload` refreshes them): ``id``, ``name``, and det's extras
    ``archived``, ``immutable``, ``num_projects``, ``num_experiments``, ``pinned``,
    ``agent_user_group``, ``checkpoint_storage_config``, ``default_compute_pool``,
    ``default_aux_pool``.

    Raises:
        ValueError: both or neither of ``workspace_id`` and ``workspace_name`` were given.
        NotFoundError: no workspace has the given name.
    """

    def __init__(
        self,
        session: Session,
        workspace_id: int | None = None,
        workspace_name: str | None = None,
    ) -> None:
        if (workspace_id is None) == (workspace_name is None):
            raise ValueError("Workspace must be constructed with either a name or id (not both).")
        self._session = session
        self._api = Client(session)
        self.name = workspace_name
        self.archived: bool | None = None
        self.immutable: bool | None = None
        self.num_projects: int | None = None
        self.num_experiments: int | None = None
        self.pinned: bool | None = None
        self.agent_user_group: dict[str, Any] | None = None
        self.checkpoint_storage_config: dict[str, Any] | None = None
        self.default_compute_pool: str | None = None
        self.default_aux_pool: str | None = None
        if workspace_id is None:
            assert workspace_name is not None
            found = self._api.workspaces.by_name(workspace_name)
            if found is None:
                raise NotFoundError(
                    "GET", "/workspaces", 404, f"No workspace found with name {workspace_name}"
                )
            self.id = int(found["id"])
            self._hydrate(found)
        else:
            self.id = int(workspace_id)

    def __repr__(self) -> str:
        return f"Workspace(id={self.id}, name={self.name!r})"

    @classmethod
    def _from_json(cls, session: Session, data: dict[str, Any]) -> Workspace:
        """A workspace hydrated from the master's ``v1Workspace`` JSON."""
        workspace = cls(session, workspace_id=int(data["id"]))
        workspace._hydrate(data)
        return workspace

    def _hydrate(self, data: dict[str, Any]) -> None:
        self.id = int(data["id"])
        self.name = data.get("name")
        self.archived = data.get("archived")
        self.immutable = data.get("immutable")
        self.num_projects = data.get("numProjects")
        self.num_experiments = data.get("numExperiments")
        self.pinned = data.get("pinned")
        self.agent_user_group = data.get("agentUserGroup")
        self.checkpoint_storage_config = data.get("checkpointStorageConfig")
        self.default_compute_pool = data.get("defaultComputePool")
        self.default_aux_pool = data.get("defaultAuxPool")

    def reload(self) -> None:
        """Refresh the cached attributes from the master."""
        self._hydrate(self._api.workspaces.get(self.id)["workspace"])

    def list_pools(self) -> list[ResourcePool]:
        """The resource pools tasks of this workspace may use."""

        def page(offset: int) -> dict[str, Any]:
            return self._api.workspaces.resource_pools(self.id, {"offset": offset})

        return [ResourcePool(self._session, n) for n in read_paginated(page, "resourcePools")]

    def create_project(self, name: str, description: str | None = None) -> Project:
        """Create a project called ``name`` in this workspace.

        Raises:
            APIError: a project with this name already exists here (409).
        """
        answer = self._api.projects.create(self.id, name, description=description)
        return Project._from_json(self._session, answer["project"])

    def delete_project(self, name: str) -> None:
        """Delete this workspace's project called ``name`` (with its finished experiments).

        Raises:
            NotFoundError: there is no such project in this workspace.
        """
        self._api.projects.delete(self.get_project(name).id)

    def get_project(self, project_name: str) -> Project:
        """This workspace's project called ``project_name``.

        Raises:
            NotFoundError: there is no such project in this workspace.
        """
        found = self._api.workspaces.projects(self.id, {"name": project_name}).get("projects")
        matching = [p for p in found or [] if p.get("name") == project_name]
        if not matching:
            raise NotFoundError(
                "GET", "/projects", 404, f"Project {project_name!r} not found in this workspace."
            )
        return Project._from_json(self._session, matching[0])

    def list_projects(self) -> list[Project]:
        """Every project of this workspace."""

        def page(offset: int) -> dict[str, Any]:
            return self._api.workspaces.projects(self.id, {"offset": offset})

        return [Project._from_json(self._session, p) for p in read_paginated(page, "projects")]

    # det's additions: the settings upstream's CLI edits, and archiving/pinning

    def set_name(self, name: str) -> None:
        """Rename the workspace (names are unique on the master, regardless of case)."""
        self._hydrate(self._api.workspaces.patch(self.id, name=name)["workspace"])

    def set_checkpoint_storage(self, config: dict[str, Any] | None) -> None:
        """Set the ``checkpoint_storage`` experiments here get when their config has none
        (``None`` removes it)."""
        answer = self._api.workspaces.patch(self.id, checkpoint_storage_config=config or {})
        self._hydrate(answer["workspace"])

    def set_agent_user_group(
        self,
        agent_uid: int | None = None,
        agent_gid: int | None = None,
        agent_user: str | None = None,
        agent_group: str | None = None,
    ) -> None:
        """Set the POSIX user and group the workspace's tasks run as (all ``None`` clears it)."""
        group: dict[str, int | str | None] = {"agentUid": agent_uid, "agentGid": agent_gid}
        group |= {"agentUser": agent_user, "agentGroup": agent_group}
        chosen = {k: v for k, v in group.items() if v is not None}
        answer = self._api.workspaces.patch(self.id, agent_user_group=chosen)
        self._hydrate(answer["workspace"])

    def archive(self) -> None:
        """Archive the workspace: its projects take no new experiments until unarchived."""
        self._api.workspaces.archive(self.id)
        self.archived = True

    def unarchive(self) -> None:
        """Unarchive the workspace."""
        self._api.workspaces.unarchive(self.id)
        self.archived = False

    def pin(self) -> None:
        """Pin the workspace for the logged-in user."""
        self._api.workspaces.pin(self.id)
        self.pinned = True

    def unpin(self) -> None:
        """Unpin the workspace for the logged-in user."""
        self._api.workspaces.unpin(self.id)
        self.pinned = False


class WorkspaceMethods:
    """``Determined``'s workspace methods (upstream's names), on its session and client."""

    _session: Session
    _api: Client

    def create_workspace(self, name: str) -> Workspace:
        """Create a workspace called ``name``.

        Raises:
            APIError: a workspace with this name (in any case) already exists (409).
        """
        answer = self._api.workspaces.create(name)
        return Workspace._from_json(self._session, answer["workspace"])

    def get_workspace(self, name: str) -> Workspace:
        """The workspace called ``name``.

        Raises:
            NotFoundError: there is none.
        """
        return Workspace(self._session, workspace_name=name)

    def list_workspaces(self) -> list[Workspace]:
        """Every workspace this user may see."""

        def page(offset: int) -> dict[str, Any]:
            return self._api.workspaces.list({"offset": offset})

        return [Workspace._from_json(self._session, w) for w in read_paginated(page, "workspaces")]

    def delete_workspace(self, name: str) -> None:
        """Delete the workspace called ``name`` with its projects and their (finished)
        experiments.

        Raises:
            NotFoundError: there is none.
        """
        self._api.workspaces.delete(self.get_workspace(name).id)
