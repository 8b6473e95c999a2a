"""determined.client.login/logout against a real master: the resolution order and the token cache."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest

from determined.client import TokenStore, UnauthenticatedError, login, logout


@pytest.fixture
def store(tmp_path: pathlib.Path) -> TokenStore:
    return TokenStore(tmp_path / "auth.json")


@pytest.fixture(autouse=True)
def _no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("DET_USER", "DET_PASS", "DET_USER_TOKEN", "DET_MASTER"):
        monkeypatch.delenv(name, raising=False)


def _me(session: Any) -> str:
    return str(session.request("GET", "/api/v1/me")["user"]["username"])


def test_default_user_then_cached(sqlite_master: Any, store: TokenStore) -> None:
    session = login(sqlite_master.url, store=store)
    assert _me(session) == "determined"
    assert store.active_user(sqlite_master.url) == "determined"
    again = login(sqlite_master.url, store=store)
    assert again.token == session.token


def test_explicit_user_password_and_logout(sqlite_master: Any, store: TokenStore) -> None:
    admin = login(sqlite_master.url, "admin", "", store=store)
    admin.request(
        "POST", "/api/v1/users/1/password", body={"password": "s3cret-pw"}, idempotent=False
    )
    with pytest.raises(UnauthenticatedError):
        login(sqlite_master.url, "admin", "wrong", store=TokenStore(store.path.with_name("x")))
    fresh = login(sqlite_master.url, "admin", "s3cret-pw", store=store)
    assert _me(fresh) == "admin"
    # a cached token is reused for the explicit user without a password
    assert login(sqlite_master.url, "admin", store=store).token == fresh.token
    logout(sqlite_master.url, store=store)
    assert store.get(sqlite_master.url, "admin") is None
    with pytest.raises(UnauthenticatedError):
        fresh.request("GET", "/api/v1/me")


def test_env_user(sqlite_master: Any, store: TokenStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DET_USER", "admin")
    monkeypatch.setenv("DET_PASS", "")
    assert _me(login(sqlite_master.url, store=store)) == "admin"
