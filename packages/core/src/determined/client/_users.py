"""Users, login and tokens: the resource client for ``/api/v1/users/...``, ``/api/v1/me`` and
``/api/v1/auth/...``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from determined.client import _routes as r
from determined.client._session import Session

Params = Mapping[str, Any]


class UsersClient:
    """One method per user endpoint; each returns the master's JSON answer."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def login(self, username: str, hashed_password: str) -> dict[str, Any]:
        """A new session token (``token``, ``user``) for a password hashed as Determined's CLI does."""
        body = {"username": username, "password": hashed_password, "isHashed": True}
        return r.call(self.session, r.AUTH_LOGIN, body=body)

    def logout(self) -> dict[str, Any]:
        """End the session whose token this client sends."""
        return r.call(self.session, r.AUTH_LOGOUT)

    def me(self) -> dict[str, Any]:
        """The user the token belongs to (``user``)."""
        return r.call(self.session, r.ME)

    def list(self, params: Params | None = None) -> dict[str, Any]:
        """One page of users (``users``, ``pagination``)."""
        return r.call(self.session, r.USERS_LIST, params=params)

    def create(self, user: Mapping[str, Any], hashed_password: str | None) -> dict[str, Any]:
        """Create a user (admins only): ``user``."""
        body = {"user": dict(user), "password": hashed_password, "isHashed": True}
        return r.call(self.session, r.USER_CREATE, body=body)

    def get(self, user_id: int | str) -> dict[str, Any]:
        """One user by id (``user``)."""
        return r.call(self.session, r.USER_GET, user_id=user_id)

    def get_by_name(self, username: str) -> dict[str, Any]:
        """One user by name (``user``)."""
        return r.call(self.session, r.USER_BY_NAME, username=username)

    def patch(self, user_id: int | str, fields: Mapping[str, Any]) -> dict[str, Any]:
        """Change a user's name, display name, active flag, admin flag or password: ``user``."""
        return r.call(self.session, r.USER_PATCH, body=dict(fields), user_id=user_id)

    def set_password(self, user_id: int | str, hashed_password: str) -> dict[str, Any]:
        """Set a user's password (hashed as Determined's CLI does)."""
        body = {"password": hashed_password, "isHashed": True}
        return r.call(self.session, r.USER_SET_PASSWORD, body=body, user_id=user_id)
