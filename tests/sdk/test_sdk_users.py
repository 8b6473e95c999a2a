"""Logging in, typed errors and users through ``determined.experimental.client``."""

from __future__ import annotations

import socket

import pytest

from determined.client import (
    APIError,
    ForbiddenError,
    MasterNotFoundError,
    NotFoundError,
    Session,
    UnauthenticatedError,
)
from determined.common.api import errors
from determined.experimental import Determined, User, client
from determined.master import Master


def test_login_whoami_logout(master: Master) -> None:
    client.login(master=master.url, user="admin", password="")
    me = client.whoami()
    assert isinstance(me, User) and me.username == "admin" and me.admin
    assert client.get_session_username() == "admin"
    session = client._determined._session  # type: ignore[union-attr]
    client.logout()
    assert client._determined is None
    with pytest.raises(UnauthenticatedError):
        Session(master.url, session.token).request("GET", "/api/v1/me")
    client.logout()  # logging out twice is harmless


def test_login_again_replaces_the_default_session(master: Master) -> None:
    client.login(master.url, "admin", "")
    client.login(master.url, "determined", "")
    assert client.whoami().username == "determined"


def test_default_session_comes_from_the_environment(
    master: Master, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DET_MASTER", master.url)
    assert client.whoami().username == "determined"  # no login(): upstream's default user
    monkeypatch.setattr(client, "_determined", None)
    monkeypatch.setenv("DET_USER", "admin")
    monkeypatch.setenv("DET_PASS", "")
    assert client.get_session_username() == "admin"


def test_typed_errors(master: Master) -> None:
    with pytest.raises(UnauthenticatedError, match="invalid credentials") as wrong:
        client.login(master.url, "admin", "not-the-password")
    assert isinstance(wrong.value, errors.UnauthenticatedException)
    assert wrong.value.status == 401

    sdk = Determined(master.url, "determined", "")
    with pytest.raises(NotFoundError, match="experiment 424242 not found") as missing:
        sdk.get_experiment(424242)
    assert isinstance(missing.value, errors.NotFoundException)
    assert isinstance(missing.value, errors.APIException)
    with pytest.raises(NotFoundError, match="trial 424242"):
        sdk.get_trial(424242)
    with pytest.raises(NotFoundError, match="checkpoint no-such-uuid"):
        sdk.get_checkpoint("no-such-uuid")
    with pytest.raises(ForbiddenError, match="admin") as forbidden:
        sdk.create_user("nobody-allowed", admin=False, password="Secret123")
    assert isinstance(forbidden.value, errors.ForbiddenException)

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        down = f"http://127.0.0.1:{sock.getsockname()[1]}"
    with pytest.raises(MasterNotFoundError, match="cannot reach the master") as unreachable:
        client.login(down, "admin", "")
    assert isinstance(unreachable.value, errors.MasterNotFoundException)


def test_users(master: Master) -> None:
    client.login(master.url, "admin", "")
    with pytest.raises(ValueError, match="upper-case letter"):
        client.create_user("weak", admin=False, password="lowercase1")
    with pytest.raises(ValueError, match="blank"):
        client.create_user("blank", admin=False)
    user = client.create_user("sdk-user", admin=False, password="Secret123")
    assert (user.username, user.admin, user.active) == ("sdk-user", False, True)
    with pytest.raises(APIError, match="already exists"):
        client.create_user("sdk-user", admin=False, password="Secret123")
    remote = client.create_user("sdk-remote", admin=False, remote=True)
    assert remote.remote

    assert client.get_user_by_id(user.user_id).username == "sdk-user"
    assert client.get_user_by_name("sdk-user").user_id == user.user_id
    names = {u.username for u in client.list_users()}
    assert {"admin", "determined", "sdk-user", "sdk-remote"} <= names

    user.change_display_name("SDK User")
    assert user.display_name == "SDK User"
    user.deactivate()
    assert not user.active
    assert "sdk-user" in {u.username for u in client.list_users(active=False)}
    assert "sdk-user" not in {u.username for u in client.list_users(active=True)}
    with pytest.raises(APIError, match="not active"):
        Determined(master.url, "sdk-user", "Secret123")
    user.activate()
    Determined(master.url, "sdk-user", "Secret123")

    user.change_password("Better456")
    with pytest.raises(ValueError, match="at least 8"):
        user.change_password("Sh0rt")
    as_user = Determined(master.url, "sdk-user", "Better456")
    assert as_user.whoami().display_name == "SDK User"
    user.rename("sdk-user-2")
    user.reload()
    assert user.username == "sdk-user-2"
    with pytest.raises(ForbiddenError):
        as_user.get_user_by_name("determined").rename("hijacked")
