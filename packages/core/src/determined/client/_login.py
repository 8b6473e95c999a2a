"""Logging in as a user: the one place the CLI, the Hydra launcher and the SDK get a session.

Resolution order (upstream's): an explicit user (with the given password, or a cached token) →
``$DET_USER`` with ``$DET_PASS`` (or ``$DET_USER_TOKEN``) → the master's active cached user whose
token the master still accepts → the default ``determined`` user with an empty password.
Passwords are salted and hashed before they leave the client, as upstream's CLI does.
"""

from __future__ import annotations

import hashlib
import os

from determined._info import canonicalize_master_url
from determined.client import _errors
from determined.client import _routes as r
from determined.client._session import Session
from determined.client._token_store import TokenStore

PASSWORD_SALT = "GubPEmmotfiK9TMD6Zdw"
DEFAULT_USER = "determined"
DEFAULT_MASTER = "localhost:8080"


def hash_password(password: str) -> str:
    """What a Determined client sends for ``password`` (``isHashed: true``); empty stays empty."""
    if not password:
        return ""
    return hashlib.sha512((PASSWORD_SALT + password).encode()).hexdigest()


def master_address(master: str | None = None) -> str:
    """The master URL: ``master``, else ``$DET_MASTER``/``$DET_MASTER_ADDR``, else localhost:8080."""
    address = (
        master
        or os.environ.get("DET_MASTER")
        or os.environ.get("DET_MASTER_ADDR")
        or DEFAULT_MASTER
    )
    return canonicalize_master_url(address)


def _token_valid(master: str, token: str) -> bool:
    try:
        r.call(Session(master, token, max_retries=1), r.ME)
    except _errors.UnauthenticatedError:
        return False
    except _errors.APIError as exc:
        return exc.status not in (401, 403)
    return True


def password_login(master: str, user: str, password: str) -> str:
    """A new session token for ``user``; UnauthenticatedError with the master's message if refused."""
    body = {"username": user, "password": hash_password(password), "isHashed": True}
    response = r.call(Session(master, max_retries=1), r.AUTH_LOGIN, body=body)
    return str(response["token"])


def login(
    master: str | None = None,
    user: str | None = None,
    password: str | None = None,
    *,
    store: TokenStore | None = None,
) -> Session:
    """An authenticated session to ``master`` (see the module docstring for the order).

    A token obtained with a password is cached in ``store`` (the default token store unless given).

    Raises:
        UnauthenticatedError: the credentials were refused.
        MasterNotFoundError: the master cannot be reached.
    """
    url = master_address(master)
    store = store if store is not None else TokenStore()
    if user is None and os.environ.get("DET_USER"):
        user = os.environ["DET_USER"]
        env_token = os.environ.get("DET_USER_TOKEN")
        if password is None and env_token:
            return Session(url, env_token)
        if password is None:
            password = os.environ.get("DET_PASS")
    if user is not None and password is None:
        cached = store.get(url, user)
        if cached and _token_valid(url, cached):
            return Session(url, cached)
        password = ""
    if user is None:
        active = store.active_user(url)
        cached = store.get(url, active) if active else None
        if cached and _token_valid(url, cached):
            return Session(url, cached)
        user, password = DEFAULT_USER, password or ""
    assert password is not None
    token = password_login(url, user, password)
    store.set(url, user, token)
    return Session(url, token)


def logout(
    master: str | None = None, user: str | None = None, *, store: TokenStore | None = None
) -> None:
    """End ``user``'s session (the active user's when ``None``) on the master and forget its token."""
    url = master_address(master)
    store = store if store is not None else TokenStore()
    name = user if user is not None else store.active_user(url)
    token = store.get(url, name) if name else None
    if token:
        try:
            r.call(Session(url, token, max_retries=1), r.AUTH_LOGOUT)
        except _errors.APIError:
            pass  # already invalid on the master: forgetting it locally is all that is left
    if name:
        store.drop(url, name)
