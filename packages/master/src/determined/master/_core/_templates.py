"""The config-templates service: named experiment-config fragments kept by the master.

A template belongs to a workspace (the default one unless said otherwise) and holds a config
mapping. ``det e create --template NAME`` merges it underneath the experiment's own config
(:func:`determined.master._core._config_merge.merge_template`), as upstream does on the master.
Values arrive parsed by the API edge; this service enforces unique names and existing workspaces.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from determined.master._core._config_merge import merge_template
from determined.master._wire import APIError
from determined.master.db import DEFAULT_WORKSPACE_ID, Database, Template, Workspace


def template_json(template: Template) -> dict[str, Any]:
    """Upstream's ``v1Template``."""
    return {
        "name": template.name,
        "config": template.config or {},
        "workspaceId": template.workspace_id,
    }


def _find(session: Session, name: str) -> Template:
    template = session.scalar(select(Template).where(Template.name == name))
    if template is None:
        raise APIError(404, f"template {name!r} not found")
    return template


def _check_name(name: str, field: str = "name") -> str:
    if not isinstance(name, str) or not name.strip():
        raise APIError(400, f"{field}: a template needs a non-empty name")
    return name


def _workspace_id(session: Session, workspace_id: int | None) -> int:
    wanted = workspace_id or DEFAULT_WORKSPACE_ID  # upstream: workspaceId 0 = Uncategorized
    if session.get(Workspace, wanted) is None:
        raise APIError(404, f"workspaceId: workspace {wanted} not found")
    return wanted


class Templates:
    """Create, read, change and delete config templates; merge one into an experiment config."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def list(
        self,
        *,
        name: str | None = None,
        workspace_ids: list[int] | None = None,
        descending: bool = False,
        offset: int = 0,
        limit: int = 0,
    ) -> tuple[list[dict[str, Any]], int]:
        """One page of templates sorted by name (``name``: a case-insensitive substring) and the
        total count."""
        stmt = select(Template)
        if name:
            stmt = stmt.where(func.lower(Template.name).contains(name.lower(), autoescape=True))
        if workspace_ids:
            stmt = stmt.where(Template.workspace_id.in_(workspace_ids))
        with self._db.read() as session:
            total = session.scalar(select(func.count()).select_from(stmt.subquery())) or 0
            stmt = stmt.order_by(Template.name.desc() if descending else Template.name)
            if offset:
                stmt = stmt.offset(offset)
            if limit:
                stmt = stmt.limit(limit)
            return [template_json(t) for t in session.scalars(stmt)], total

    def workspace_of(self, name: str) -> int:
        """The workspace of the template called ``name`` (404 when there is none)."""
        with self._db.read() as session:
            return int(_find(session, name).workspace_id)

    def get(self, name: str) -> dict[str, Any]:
        """The template called ``name`` (404 when there is none)."""
        with self._db.read() as session:
            return template_json(_find(session, name))

    def create(self, name: str, config: dict[str, Any], workspace_id: int | None) -> dict[str, Any]:
        """A new template (409 when the name is taken)."""
        _check_name(name)
        with self._db.write() as session:
            if session.scalar(select(Template.name).where(Template.name == name)) is not None:
                raise APIError(409, f"name: a template named {name!r} already exists")
            template = Template(
                name=name, config=config, workspace_id=_workspace_id(session, workspace_id)
            )
            session.add(template)
            session.flush()
            return template_json(template)

    def put(
        self, name: str, config: dict[str, Any] | None, workspace_id: int | None
    ) -> dict[str, Any]:
        """Create or update (upstream's deprecated upsert): a missing config or workspace id
        leaves that field as it is."""
        _check_name(name)
        with self._db.write() as session:
            template = session.scalar(select(Template).where(Template.name == name))
            if template is None:
                template = Template(
                    name=name,
                    config=config or {},
                    workspace_id=_workspace_id(session, workspace_id),
                )
                session.add(template)
            else:
                if config is not None:
                    template.config = config
                if workspace_id:
                    template.workspace_id = _workspace_id(session, workspace_id)
            session.flush()
            return template_json(template)

    def set_config(self, name: str, config: dict[str, Any]) -> dict[str, Any]:
        """Replace the config of an existing template."""
        with self._db.write() as session:
            template = _find(session, name)
            template.config = config
            return template_json(template)

    def rename(self, old_name: str, new_name: str) -> dict[str, Any]:
        """Give a template another name (409 when taken)."""
        _check_name(new_name, "newName")
        with self._db.write() as session:
            template = _find(session, old_name)
            if old_name != new_name and session.scalar(
                select(Template.name).where(Template.name == new_name)
            ):
                raise APIError(409, f"newName: a template named {new_name!r} already exists")
            template.name = new_name
            return template_json(template)

    def delete(self, name: str) -> None:
        """Remove a template (404 when there is none)."""
        with self._db.write() as session:
            session.delete(_find(session, name))

    def apply(self, name: str, config: dict[str, Any]) -> dict[str, Any]:
        """``config`` merged over the template called ``name`` (404 ``template`` when missing)."""
        with self._db.read() as session:
            template = session.scalar(select(Template).where(Template.name == name))
            if template is None:
                raise APIError(404, f"template: template {name!r} not found")
            return merge_template(config, dict(template.config or {}))
