"""Upstream's ``determined.common.api.authentication``: logging in to get an ``api.Session``.

Each function wraps det's client (``determined.client.login``/``logout`` and its token store), so
a token cached here is the one ``det user login`` and det's SDK use.
"""

from __future__ import annotations

import os
import re
import sys
from typing import Any

from determined import client
from determined._info import canonicalize_master_url
from determined.client import TokenStore, hash_password
from determined.common.api import bindings
from determined.common.api._messages import v1LoginRequest
from determined.common.api._session import Session, TaskSession, UnauthSession

salt_and_hash = hash_password
"""The password hash a Determined client sends (``isHashed: true``); an empty password stays empty."""

__all__ = [
    "TokenStore",
    "check_password_complexity",
    "get_det_password_from_env",
    "get_det_session_token_from_env",
    "get_det_user_token_from_env",
    "get_det_username_from_env",
    "login",
    "login_from_task",
    "login_with_cache",
    "logout",
    "logout_all",
    "salt_and_hash",
    "warn_about_complexity",
]


def check_password_complexity(password: str | None) -> None:
    """Raise ``ValueError`` listing each rule ``password`` breaks: at least 8 characters, an
    upper-case letter, a lower-case letter and a digit."""
    rules = [
        ("password cannot be blank", bool(password)),
        ("password must have at least 8 characters", len(password or "") >= 8),
        ("password must include an uppercase letter", re.search(r"[A-Z]", password or "")),
        ("password must include a lowercase letter", re.search(r"[a-z]", password or "")),
        ("password must include a number", re.search(r"\d", password or "")),
    ]
    if not all(ok for _, ok in rules):
        raise ValueError("\n".join(("\u2713 " if ok else "\u2717 ") + text for text, ok in rules))


def warn_about_complexity(e: ValueError) -> None:
    """Tell the user on stderr that their password breaks the complexity rules in ``e``."""
    print(
        f"Warning: your password does not meet the recommended complexity rules:\n{e}\n"
        "Please change your password soon.",
        file=sys.stderr,
    )


def get_det_username_from_env() -> str | None:
    """``$DET_USER``."""
    return os.environ.get("DET_USER")


def get_det_user_token_from_env() -> str | None:
    """``$DET_USER_TOKEN``."""
    return os.environ.get("DET_USER_TOKEN")


def get_det_password_from_env() -> str | None:
    """``$DET_PASS``."""
    return os.environ.get("DET_PASS")


def get_det_session_token_from_env() -> str | None:
    """``$DET_SESSION_TOKEN``."""
    return os.environ.get("DET_SESSION_TOKEN")


def login(master_address: str, username: str, password: str, cert: Any = None) -> Session:
    """A new session for ``username`` (the token cache is neither read nor written).

    Raises:
        determined.common.api.errors.UnauthenticatedException: the credentials were refused.
    """
    master = canonicalize_master_url(master_address)
    request = v1LoginRequest(username=username, password=salt_and_hash(password), isHashed=True)
    unauthenticated = UnauthSession(master, cert, max_retries=1)
    answer = bindings.post_Login(unauthenticated, body=request)  # type: ignore[attr-defined]
    return Session(master, username, str(answer.token), cert)


def login_with_cache(
    master_address: str,
    requested_user: str | None = None,
    password: str | None = None,
    cert: Any = None,
) -> Session:
    """A session from a cached token when one is still valid, else from a new login (cached).

    ``$DET_USER``/``$DET_USER_TOKEN``/``$DET_PASS`` apply as for ``det``; without a user, the
    master's active user, then upstream's default user ``determined``, are tried.
    """
    session = client.login(master_address, requested_user, password)
    username = requested_user or session_user(session)
    return Session(session.master_url, username, session.token or "", cert)


def session_user(session: client.Session) -> str:
    """The name of the user a session's token belongs to."""
    return str(client.Client(session).users.me()["user"]["username"])


def logout(master_address: str, requested_user: str | None, cert: Any) -> None:
    """End ``requested_user``'s cached session (the active user's when ``None``) and forget it."""
    client.logout(master_address, requested_user)


def logout_all(master_address: str, cert: Any) -> None:
    """End every cached session for ``master_address``."""
    master = canonicalize_master_url(master_address)
    for username in TokenStore().users(master):
        client.logout(master, username)


def login_from_task(master_address: str, cert: Any) -> TaskSession:
    """The session of a task process, from ``$DET_SESSION_TOKEN`` and ``$DET_USER``.

    Raises:
        ValueError: either variable is not set.
    """
    token = get_det_session_token_from_env()
    if not token:
        raise ValueError("DET_SESSION_TOKEN environment variable not set.")
    username = get_det_username_from_env()
    if not username:
        raise ValueError("DET_USER environment variable not set.")
    return TaskSession(master_address, username, token, cert)
