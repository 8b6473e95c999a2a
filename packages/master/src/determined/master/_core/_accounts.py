"""The accounts service: users, their passwords and login sessions.

Passwords arrive already client-hashed (upstream's scheme, done at the API edge); this service salts
and stores them, checks them at login and issues session tokens (only their hashes are stored).
"""

from __future__ import annotations

import dataclasses
import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from determined.master import _auth
from determined.master._wire import APIError
from determined.master.db import Database, User, UserSession, utcnow


@dataclasses.dataclass(frozen=True)
class UserChanges:
    """The changes of ``PATCH /api/v1/users/{id}`` (None: leave as is)."""

    username: str | None = None
    display_name: str | None = None
    admin: bool | None = None
    active: bool | None = None
    remote: bool | None = None
    hashed_password: str | None = None
    """The client-hashed new password."""


def find_user(session: Session, user_id: int) -> User:
    """A user by id, or a 404."""
    user = session.get(User, user_id)
    if user is None:
        raise APIError(404, f"user {user_id} not found")
    return user


class Accounts:
    """User accounts and login sessions of one master."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def login(self, username: str, hashed_password: str) -> tuple[str, User]:
        """A new session token for valid credentials, and the user (401/403 otherwise)."""
        with self._db.write() as session:
            user = session.scalar(select(User).where(User.username == username))
            if (
                user is None
                or user.remote
                or not _auth.check_password(hashed_password, user.password_hash)
            ):
                raise APIError(401, "invalid credentials")
            if not user.active:
                raise APIError(403, "user is not active")
            token = _auth.new_token()
            session.add(
                UserSession(
                    user_id=user.id,
                    token_hash=_auth.token_hash(token),
                    expiry=utcnow() + datetime.timedelta(days=_auth.SESSION_DAYS),
                )
            )
            user.last_auth_at = utcnow()
            session.flush()
            return token, user

    def logout(self, session_id: int) -> None:
        """Revoke one login session (an access token is left alone: it is revoked explicitly)."""
        with self._db.write() as session:
            sess = session.get(UserSession, session_id)
            if sess is not None and sess.token_type != "ACCESS_TOKEN":
                session.delete(sess)

    def create(
        self,
        *,
        username: str,
        display_name: str | None,
        admin: bool,
        active: bool,
        remote: bool,
        hashed_password: str,
    ) -> User:
        """A new user (409 when the name is taken)."""
        with self._db.write() as session:
            if session.scalar(select(User).where(User.username == username)) is not None:
                raise APIError(409, f"user {username!r} already exists")
            user = User(
                username=username,
                display_name=display_name,
                admin=admin,
                active=active,
                remote=remote,
                password_hash=_auth.store_hash(hashed_password),
            )
            session.add(user)
            session.flush()
            return user

    def change(self, user_id: int, changes: UserChanges) -> User:
        """Apply ``changes`` to a user (409 when the new name is taken)."""
        with self._db.write() as session:
            user = find_user(session, user_id)
            if changes.username is not None:
                clash = session.scalar(
                    select(User).where(User.username == changes.username, User.id != user_id)
                )
                if clash is not None:
                    raise APIError(409, f"user {changes.username!r} already exists")
                user.username = changes.username
            if changes.display_name is not None:
                user.display_name = changes.display_name
            if changes.admin is not None:
                user.admin = changes.admin
            if changes.active is not None:
                user.active = changes.active
            if changes.remote is not None:
                user.remote = changes.remote
            if changes.hashed_password is not None:
                user.password_hash = _auth.store_hash(changes.hashed_password)
            user.modified_at = utcnow()
            session.flush()
            return user

    def set_password(self, user_id: int, hashed_password: str) -> User:
        """Replace a user's password."""
        return self.change(user_id, UserChanges(hashed_password=hashed_password))
