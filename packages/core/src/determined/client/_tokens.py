"""Access tokens: the resource client for upstream 0.38's ``/api/v1/tokens`` routes."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from determined.client import _routes as r
from determined.client._session import Session


class TokensClient:
    """Create, search, edit and revoke access tokens; each method returns the master's JSON answer.

    An access token is a long-lived bearer token of one user: send it as ``Authorization: Bearer``
    (``Session(master, token)``) like a login session's token.
    """

    def __init__(self, session: Session) -> None:
        self.session = session

    def create(
        self, user_id: int, lifespan: str | None = None, description: str = ""
    ) -> dict[str, Any]:
        """A new token for ``user_id`` (``token``, shown only now, and ``tokenId``); ``lifespan`` is a
        Go duration (``"720h"``) or ``"-1"`` for the longest the master allows."""
        body: dict[str, Any] = {"userId": int(user_id), "description": description}
        if lifespan is not None:
            body["lifespan"] = lifespan
        return r.call(self.session, r.TOKEN_CREATE, body=body)

    def list(
        self,
        *,
        token_ids: Iterable[int] | None = None,
        username: str | None = None,
        show_inactive: bool = False,
        params: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Tokens the caller may see, without secrets (``tokenInfo``, ``pagination``): only active
        ones unless ``show_inactive``; ``params`` adds ``sortBy``/``orderBy``/``offset``/``limit``."""
        query: dict[str, Any] = dict(params or {})
        if token_ids:
            query["tokenIds"] = [int(i) for i in token_ids]
        if username:
            query["username"] = username
        if show_inactive:
            query["showInactive"] = "true"
        return r.call(self.session, r.TOKENS_LIST, params=query)

    def patch(
        self, token_id: int, *, description: str | None = None, revoke: bool = False
    ) -> dict[str, Any]:
        """Change an active token's description and/or revoke it: ``tokenInfo``."""
        body: dict[str, Any] = {"tokenId": int(token_id), "setRevoked": bool(revoke)}
        if description is not None:
            body["description"] = description
        return r.call(self.session, r.TOKEN_PATCH, body=body, token_id=token_id)

    def revoke(self, token_id: int) -> dict[str, Any]:
        """Revoke a token: it stops authenticating at once. ``tokenInfo``."""
        return self.patch(token_id, revoke=True)
