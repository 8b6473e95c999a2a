"""The master itself: the resource client for ``/api/v1/master/...``."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from determined.client import _routes as r
from determined.client._session import Session


class MasterInfoClient:
    """The master's identity, configuration and own logs."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def info(self) -> dict[str, Any]:
        """Version, cluster id and name (needs no login)."""
        return r.call(self.session, r.MASTER_INFO)

    def config(self) -> dict[str, Any]:
        """The master's configuration (``config``; admins only)."""
        return r.call(self.session, r.MASTER_CONFIG)

    def logs(self, params: Mapping[str, Any] | None = None) -> Iterator[dict[str, Any]]:
        """The master's own log records as it streams them (``follow`` keeps it open)."""
        return r.stream(self.session, r.MASTER_LOGS, params=params)
