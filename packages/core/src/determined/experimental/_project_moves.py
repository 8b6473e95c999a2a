"""What makes an SDK object a member of a project: moving it to another project by name."""

from __future__ import annotations

from typing import Any

from determined.client import Client, NotFoundError


def find_project(api: Client, workspace_name: str, project_name: str) -> dict[str, Any]:
    """The ``v1Project`` of project ``project_name`` in workspace ``workspace_name``.

    Raises:
        NotFoundError: there is no such workspace, or no such project in it.
    """
    workspaces = api.workspaces.list({"name": workspace_name}).get("workspaces") or []
    workspace = next((w for w in workspaces if w.get("name") == workspace_name), None)
    if workspace is None:
        raise NotFoundError("GET", "workspaces", 404, f"workspace {workspace_name!r} not found")
    answer = api.workspaces.projects(int(workspace["id"]), {"name": project_name})
    project = next((p for p in answer.get("projects") or [] if p.get("name") == project_name), None)
    if project is None:
        raise NotFoundError(
            "GET",
            "projects",
            404,
            f"project {project_name!r} not found in workspace {workspace_name!r}",
        )
    return dict(project)


class ProjectMember:
    """The project side of :class:`~determined.experimental.Experiment` (upstream's
    ``move_to_project``), kept apart so the experiment class stays small."""

    _api: Client
    _id: int
    project_id: int | None
    workspace_id: int | None

    def move_to_project(self, workspace_name: str, project_name: str) -> None:
        """Move the experiment to project ``project_name`` of workspace ``workspace_name``;
        ``project_id`` and ``workspace_id`` follow.

        Raises:
            NotFoundError: no such workspace or project.
            APIError: the experiment or either project is archived.
        """
        project = find_project(self._api, workspace_name, project_name)
        self._api.projects.move_experiment(self._id, int(project["id"]))
        self.project_id = int(project["id"])
        self.workspace_id = int(project["workspaceId"])
