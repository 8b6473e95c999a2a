"""``Project``: a named collection of experiments in a workspace, with notes (upstream's SDK class)."""

from __future__ import annotations

from typing import Any

from determined.client import Client, Session
from determined.experimental._experiment import Experiment
from determined.experimental._util import read_paginated


class Project:
    """A project: obtained from a ``Workspace`` (``create_project``, ``get_project``) or made from its
    id with ``Project(session, project_id)`` and :meth:`reload`.

    Attributes (cached; :meth:`reload` refreshes them): ``id``, ``key``, ``name``, ``description``,
    ``archived``, ``notes`` (a list of ``{"name", "contents"}`` dicts), ``n_experiments``,
    ``n_active_experiments``, ``username`` (the creator), ``workspace_id``.
    """

    def __init__(self, session: Session, project_id: int) -> None:
        self._session = session
        self._api = Client(session)
        self.id = project_id
        self.archived: bool | None = None
        self.description: str | None = None
        self.n_active_experiments: int | None = None
        self.n_experiments: int | None = None
        self.name: str | None = None
        self.notes: list[dict[str, str]] | None = None
        self.workspace_id: int | None = None
        self.username: str | None = None
        self.key: str | None = None

    def __repr__(self) -> str:
        return f"Project(id={self.id}, name={self.name!r})"

    @classmethod
    def _from_json(cls, session: Session, data: dict[str, Any]) -> Project:
        """A project hydrated from the master's ``v1Project`` JSON."""
        project = cls(session, int(data["id"]))
        project._hydrate(data)
        return project

    def _hydrate(self, data: dict[str, Any]) -> None:
        self.archived = data.get("archived")
        self.description = data.get("description")
        self.n_active_experiments = data.get("numActiveExperiments")
        self.n_experiments = data.get("numExperiments")
        self.name = data.get("name")
        self.notes = [dict(n) for n in data.get("notes") or []]
        self.workspace_id = data.get("workspaceId")
        self.username = data.get("username")
        self.key = data.get("key")

    def reload(self) -> None:
        """Refresh the cached attributes from the master."""
        self._hydrate(self._api.projects.get(self.id)["project"])

    def list_experiments(self) -> list[Experiment]:
        """Every experiment of this project (all users', archived ones too)."""

        def page(offset: int) -> dict[str, Any]:
            return self._api.experiments.list({"projectId": self.id, "offset": offset})

        return [
            Experiment._from_json(e, self._session) for e in read_paginated(page, "experiments")
        ]

    def set_description(self, description: str) -> None:
        """Set the project's description, here and on the master."""
        self._hydrate(self._api.projects.patch(self.id, description=description)["project"])

    def set_key(self, key: str) -> None:
        """Set the project's key (1-5 letters or digits, unique on the master)."""
        self._hydrate(self._api.projects.patch(self.id, key=key)["project"])

    def set_name(self, name: str) -> None:
        """Rename the project (names are unique within a workspace)."""
        self._hydrate(self._api.projects.patch(self.id, name=name)["project"])

    def archive(self) -> None:
        """Archive the project: it takes no new experiments until unarchived."""
        self._api.projects.archive(self.id)
        self.archived = True

    def unarchive(self) -> None:
        """Unarchive the project."""
        self._api.projects.unarchive(self.id)
        self.archived = False

    def add_note(self, name: str, contents: str) -> None:
        """Add a note to the project; ``notes`` then holds the master's notes (which may include
        notes others added since this object was last loaded)."""
        self.notes = [
            dict(n) for n in self._api.projects.add_note(self.id, name, contents)["notes"]
        ]

    def remove_note(self, name: str) -> None:
        """Remove the one note called ``name``.

        Raises:
            ValueError: no note, or more than one note, has this name.
        """
        fresh = list(self._api.projects.get(self.id)["project"].get("notes") or [])
        matching = [i for i, note in enumerate(fresh) if note.get("name") == name]
        if not matching:
            raise ValueError(f"No note with name '{name}' found to remove.")
        if len(matching) > 1:
            raise ValueError(
                f"Multiple notes with name '{name}' found; remove it with put_notes or the web UI."
            )
        fresh.pop(matching[0])
        self.notes = [dict(n) for n in self._api.projects.put_notes(self.id, fresh)["notes"]]
