"""Notebooks: ``/api/v1/notebooks``, JupyterLab tasks served through the master's proxy."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from determined.client import _routes as r
from determined.client._session import Session


class NotebooksClient:
    """``/api/v1/notebooks/...``: one method per endpoint; each returns the master's JSON answer
    (upstream's ``Notebook`` message under ``notebook``)."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def list(self, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Notebooks (``notebooks``, ``pagination``); ``users``/``userIds`` filter owners."""
        return r.call(self.session, r.NOTEBOOKS_LIST, params=params)

    def launch(
        self,
        *,
        config: Mapping[str, Any] | None = None,
        files: Sequence[Mapping[str, Any]] | None = None,
        preview: bool = False,
    ) -> dict[str, Any]:
        """Start JupyterLab with ``files`` (the context) as its working directory: ``notebook``,
        ``config``, ``warnings``; ``preview`` only answers the config it would run with."""
        body: dict[str, Any] = {"config": dict(config or {})}
        if files:
            body["files"] = list(files)
        if preview:
            body["preview"] = True
        return r.call(self.session, r.NOTEBOOK_LAUNCH, body=body)

    def get(self, notebook_id: str) -> dict[str, Any]:
        """One notebook: ``notebook`` and ``config``."""
        return r.call(self.session, r.NOTEBOOK_GET, notebook_id=notebook_id)

    def kill(self, notebook_id: str) -> dict[str, Any]:
        """Stop a notebook: ``notebook``."""
        return r.call(self.session, r.NOTEBOOK_KILL, body={}, notebook_id=notebook_id)

    def report_idle(self, notebook_id: str, idle: bool) -> dict[str, Any]:
        """Tell the master whether the notebook is idle (``False`` defers its idle timeout)."""
        return r.call(
            self.session, r.NOTEBOOK_REPORT_IDLE, body={"idle": idle}, notebook_id=notebook_id
        )
