"""Config templates: the resource client for ``/api/v1/templates/...``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from determined.client import _routes as r
from determined.client._session import Session

Params = Mapping[str, Any]


class TemplatesClient:
    """One method per config-template endpoint; each returns the master's JSON answer (a template
    is upstream's ``{name, config, workspaceId}``)."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def list(self, params: Params | None = None) -> dict[str, Any]:
        """Templates sorted by name (``templates``, ``pagination``); ``name``, ``workspaceIds``,
        ``orderBy``, ``offset``, ``limit`` as upstream names them."""
        return r.call(self.session, r.TEMPLATES_LIST, params=params)

    def get(self, name: str) -> dict[str, Any]:
        """One template (``template``)."""
        return r.call(self.session, r.TEMPLATE_GET, template_name=name)

    def create(
        self, name: str, config: Mapping[str, Any], workspace_id: int | None = None
    ) -> dict[str, Any]:
        """A new template (in the default workspace unless ``workspace_id``): ``template``."""
        body = {"name": name, "config": dict(config), "workspaceId": workspace_id or 0}
        return r.call(self.session, r.TEMPLATE_CREATE, body=body, template_name=name)

    def put(
        self, name: str, config: Mapping[str, Any], workspace_id: int | None = None
    ) -> dict[str, Any]:
        """Create or replace a template in one request (upstream's deprecated upsert)."""
        body = {"name": name, "config": dict(config), "workspaceId": workspace_id or 0}
        return r.call(self.session, r.TEMPLATE_PUT, body=body, template_name=name)

    def set_config(self, name: str, config: Mapping[str, Any]) -> dict[str, Any]:
        """Replace an existing template's config: ``template``."""
        return r.call(self.session, r.TEMPLATE_PATCH_CONFIG, body=dict(config), template_name=name)

    def rename(self, old_name: str, new_name: str) -> dict[str, Any]:
        """Rename a template: ``template``."""
        body = {"oldName": old_name, "newName": new_name}
        return r.call(self.session, r.TEMPLATE_RENAME, body=body)

    def delete(self, name: str) -> dict[str, Any]:
        """Remove a template."""
        return r.call(self.session, r.TEMPLATE_DELETE, template_name=name)
