"""``User``: an account on the master, and upstream's client-side password rules."""

from __future__ import annotations

from typing import Any

from determined.client import Client, Session, hash_password


def check_password_complexity(password: str | None) -> None:
    """Upstream's rules for new passwords: at least 8 characters with an upper-case letter, a
    lower-case letter and a digit.

    Raises:
        ValueError: listing every rule the password breaks.
    """
    if not password:
        raise ValueError("password: cannot be blank")
    problems = []
    if len(password) < 8:
        problems.append("at least 8 characters")
    if not any(c.isupper() for c in password):
        problems.append("an upper-case letter")
    if not any(c.islower() for c in password):
        problems.append("a lower-case letter")
    if not any(c.isdigit() for c in password):
        problems.append("a digit")
    if problems:
        raise ValueError(f"password: must contain {', '.join(problems)}")


def new_user_fields(
    username: str, admin: bool, password: str | None, remote: bool
) -> tuple[dict[str, Any], str | None]:
    """The ``user`` object and hashed password of a create-user request, checked as upstream does
    (a non-empty name; a password that passes :func:`check_password_complexity` unless remote)."""
    if not isinstance(username, str) or not username.strip():
        raise ValueError(f"username: must be a non-empty string, got {username!r}")
    hashed = None
    if not remote:
        check_password_complexity(password)
        hashed = hash_password(password or "")
    return {"username": username, "admin": bool(admin), "active": True, "remote": remote}, hashed


class User:
    """A user of the master: from ``client.whoami()``, ``client.list_users()`` and friends.

    Attributes (cached; :meth:`reload` refreshes them): ``user_id``, ``username``, ``admin``,
    ``active``, ``remote``, ``display_name``, ``agent_uid``, ``agent_gid``, ``agent_user``,
    ``agent_group``.
    """

    def __init__(self, user_id: int, session: Session) -> None:
        self.user_id = user_id
        self._session = session
        self._api = Client(session)
        self.username: str | None = None
        self.admin: bool | None = None
        self.active: bool | None = None
        self.remote: bool | None = None
        self.agent_uid: int | None = None
        self.agent_gid: int | None = None
        self.agent_user: str | None = None
        self.agent_group: str | None = None
        self.display_name: str | None = None

    def __repr__(self) -> str:
        return f"User(id={self.user_id}, username={self.username!r})"

    def _hydrate(self, data: dict[str, Any]) -> None:
        self.username = data.get("username")
        self.admin = bool(data.get("admin"))
        self.remote = bool(data.get("remote", False))
        self.active = bool(data.get("active", True))
        self.display_name = data.get("displayName")
        group = data.get("agentUserGroup") or {}
        self.agent_uid = group.get("agentUid")
        self.agent_gid = group.get("agentGid")
        self.agent_user = group.get("agentUser")
        self.agent_group = group.get("agentGroup")

    @classmethod
    def _from_json(cls, data: dict[str, Any], session: Session) -> User:
        user = cls(int(data["id"]), session)
        user._hydrate(data)
        return user

    def reload(self) -> None:
        """Refresh the cached attributes from the master."""
        self._hydrate(self._api.users.get(self.user_id)["user"])

    def _patch(self, **fields: Any) -> None:
        answer = self._api.users.patch(self.user_id, fields)
        self._hydrate(answer["user"])

    def rename(self, new_username: str) -> None:
        """Change the username (admins)."""
        self._patch(username=new_username)

    def activate(self) -> None:
        """Let the user log in again (admins)."""
        self._patch(active=True)

    def deactivate(self) -> None:
        """Stop the user from logging in (admins)."""
        self._patch(active=False)

    def change_display_name(self, display_name: str) -> None:
        """Change the name shown for the user."""
        self._patch(displayName=display_name)

    def change_password(self, new_password: str) -> None:
        """Set a new password (the user themself or an admin).

        Raises:
            ValueError: the password breaks upstream's complexity rules.
        """
        check_password_complexity(new_password)
        self._patch(password=hash_password(new_password), isHashed=True)
