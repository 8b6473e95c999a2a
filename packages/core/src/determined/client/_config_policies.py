"""Config policies: the resource client for ``/api/v1/config-policies/...`` (upstream's routes).

A workload type is ``EXPERIMENT`` or ``NTSC`` (notebooks, shells, commands, TensorBoards); no
``workspace_id`` means the global policies.
"""

from __future__ import annotations

from typing import Any

from determined.client import _routes as r
from determined.client._session import Session

_GLOBAL = "/api/v1/config-policies/global/{workload_type}"
_WORKSPACE = "/api/v1/config-policies/workspaces/{workspace_id}/{workload_type}"
GLOBAL_GET = r._route("config_policies.get_global", "GET", _GLOBAL)
GLOBAL_PUT = r._route("config_policies.put_global", "PUT", _GLOBAL)
GLOBAL_DELETE = r._route("config_policies.delete_global", "DELETE", _GLOBAL)
WORKSPACE_GET = r._route("config_policies.get_workspace", "GET", _WORKSPACE)
WORKSPACE_PUT = r._route("config_policies.put_workspace", "PUT", _WORKSPACE)
WORKSPACE_DELETE = r._route("config_policies.delete_workspace", "DELETE", _WORKSPACE)


class ConfigPoliciesClient:
    """One method per config-policy endpoint; answers are the master's JSON
    (``configPolicies``: ``{invariant_config, constraints}`` as far as they are set)."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def get(self, workload_type: str, workspace_id: int | None = None) -> dict[str, Any]:
        """The policies of one scope (``configPolicies``, ``{}`` when none are set)."""
        if workspace_id is None:
            return r.call(self.session, GLOBAL_GET, workload_type=workload_type)
        return r.call(
            self.session, WORKSPACE_GET, workload_type=workload_type, workspace_id=workspace_id
        )

    def put(
        self, workload_type: str, policies: str, workspace_id: int | None = None
    ) -> dict[str, Any]:
        """Replace the policies of one scope with ``policies`` (YAML or JSON text)."""
        body: dict[str, Any] = {"workloadType": workload_type, "configPolicies": policies}
        if workspace_id is None:
            return r.call(self.session, GLOBAL_PUT, body=body, workload_type=workload_type)
        body["workspaceId"] = workspace_id
        return r.call(
            self.session,
            WORKSPACE_PUT,
            body=body,
            workload_type=workload_type,
            workspace_id=workspace_id,
        )

    def delete(self, workload_type: str, workspace_id: int | None = None) -> dict[str, Any]:
        """Drop the policies of one scope."""
        if workspace_id is None:
            return r.call(self.session, GLOBAL_DELETE, workload_type=workload_type)
        return r.call(
            self.session, WORKSPACE_DELETE, workload_type=workload_type, workspace_id=workspace_id
        )
