"""Projects: the resource client for ``/api/v1/projects/...`` and moving experiments between them."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from determined.client import _routes as r
from determined.client._session import Session


class ProjectsClient:
    """One method per project endpoint; each returns the master's JSON answer (a project is
    upstream's ``v1Project``: ``id``, ``name``, ``key``, ``workspaceId``, ``notes``, ...)."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def create(
        self,
        workspace_id: int,
        name: str,
        *,
        description: str | None = None,
        key: str | None = None,
    ) -> dict[str, Any]:
        """Add a project to a workspace: ``project``."""
        body: dict[str, Any] = {"name": name, "workspaceId": workspace_id}
        if description is not None:
            body["description"] = description
        if key is not None:
            body["key"] = key
        return r.call(self.session, r.PROJECT_CREATE, body=body, workspace_id=workspace_id)

    def get(self, project_id: int) -> dict[str, Any]:
        """One project (``project``)."""
        return r.call(self.session, r.PROJECT_GET, project_id=project_id)

    def get_by_key(self, key: str) -> dict[str, Any]:
        """The project with this key, case-insensitive (``project``)."""
        return r.call(self.session, r.PROJECT_GET_BY_KEY, key=key)

    def patch(
        self,
        project_id: int,
        *,
        name: str | None = None,
        description: str | None = None,
        key: str | None = None,
    ) -> dict[str, Any]:
        """Change a project's name, description or key; the answer holds the new ``project``."""
        fields = {"name": name, "description": description, "key": key}
        body = {k: v for k, v in fields.items() if v is not None}
        return r.call(self.session, r.PROJECT_PATCH, body=body, project_id=project_id)

    def delete(self, project_id: int) -> dict[str, Any]:
        """Delete a project and its finished experiments (``completed``)."""
        return r.call(self.session, r.PROJECT_DELETE, project_id=project_id)

    def archive(self, project_id: int) -> dict[str, Any]:
        """Archive a project (it takes no new experiments)."""
        return r.call(self.session, r.PROJECT_ARCHIVE, project_id=project_id)

    def unarchive(self, project_id: int) -> dict[str, Any]:
        """Unarchive a project."""
        return r.call(self.session, r.PROJECT_UNARCHIVE, project_id=project_id)

    def move(self, project_id: int, destination_workspace_id: int) -> dict[str, Any]:
        """Move a project to another workspace."""
        body = {"projectId": project_id, "destinationWorkspaceId": destination_workspace_id}
        return r.call(self.session, r.PROJECT_MOVE, body=body, project_id=project_id)

    def add_note(self, project_id: int, name: str, contents: str) -> dict[str, Any]:
        """Append a note; the answer holds every ``notes`` of the project."""
        body = {"name": name, "contents": contents}
        return r.call(self.session, r.PROJECT_ADD_NOTE, body=body, project_id=project_id)

    def put_notes(self, project_id: int, notes: Iterable[dict[str, str]]) -> dict[str, Any]:
        """Replace a project's notes (each ``{"name", "contents"}``): ``notes``."""
        body = {"projectId": project_id, "notes": [dict(n) for n in notes]}
        return r.call(self.session, r.PROJECT_PUT_NOTES, body=body, project_id=project_id)

    def columns(self, project_id: int) -> dict[str, Any]:
        """The columns of the project's experiment table (``columns``)."""
        return r.call(self.session, r.PROJECT_COLUMNS, project_id=project_id)

    def move_experiment(self, experiment_id: int, destination_project_id: int) -> dict[str, Any]:
        """Move one experiment to another project."""
        body = {"experimentId": experiment_id, "destinationProjectId": destination_project_id}
        return r.call(self.session, r.EXPERIMENT_MOVE, body=body, experiment_id=experiment_id)

    def move_experiments(
        self, project_id: int, experiment_ids: Iterable[int], destination_project_id: int
    ) -> dict[str, Any]:
        """Move several experiments of a project: ``results`` (``{id, error}`` each)."""
        body = {
            "projectId": project_id,
            "experimentIds": [int(i) for i in experiment_ids],
            "destinationProjectId": destination_project_id,
        }
        return r.call(self.session, r.EXPERIMENTS_MOVE, body=body, project_id=project_id)
