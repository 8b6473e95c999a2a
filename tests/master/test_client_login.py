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


def test_create_experiment(sqlite_master: Any, store: TokenStore, tmp_path: pathlib.Path) -> None:
    from determined.client import APIError, create_experiment

    session = login(sqlite_master.url, store=store)
    (tmp_path / "ctx").mkdir()
    (tmp_path / "ctx" / "train.py").write_text("print('hi')\n")
    config = {
        "name": "x",
        "entrypoint": "python3 train.py",
        "searcher": {"name": "single", "metric": "loss", "max_length": 1},
    }
    created = create_experiment(session, config, tmp_path / "ctx", activate=False)
    assert created.id is not None and created.config["name"] == "x"
    with pytest.raises(APIError, match="searcher"):
        create_experiment(session, {**config, "searcher": {"name": "nope"}}, tmp_path / "ctx")
