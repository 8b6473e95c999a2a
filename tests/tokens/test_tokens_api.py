"""Access tokens over REST and the typed client: create, list, describe, edit, revoke; a token
authenticates like a session; a revoked or expired token is refused at once; who may do what."""

from __future__ import annotations

import time
from typing import Any

import pytest
import requests

from determined import client
from determined.client import Session

ADMIN_ROUTE = "/api/v1/me"


def _status(url: str, token: str, path: str = ADMIN_ROUTE) -> int:
    """The status of one GET with ``token`` as the bearer token (no client retries)."""
    return requests.get(
        url + path, headers={"Authorization": f"Bearer {token}"}, timeout=30
    ).status_code


def _wait(predicate: Any, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@pytest.fixture(scope="module")
def users(module_master: Any) -> dict[str, Any]:
    """Users ``alice`` and ``bob`` (passwords 'pw') and clients of admin, alice and bob."""
    admin = client.Client(module_master.session("admin"))
    for name in ("alice", "bob"):
        admin.users.create({"username": name, "active": True}, client.hash_password("pw"))
    return {
        "admin": admin,
        "alice": client.Client(module_master.session("alice", "pw")),
        "bob": client.Client(module_master.session("bob", "pw")),
        "alice_id": admin.users.get_by_name("alice")["user"]["id"],
        "bob_id": admin.users.get_by_name("bob")["user"]["id"],
    }


def test_create_list_describe_and_use(module_master: Any, users: dict[str, Any]) -> None:
    alice = users["alice"]
    made = alice.tokens.create(users["alice_id"], "48h", "ci pipeline")
    token, token_id = made["token"], int(made["tokenId"])
    assert token and token_id > 0

    # The token authenticates as alice on any route, as a bearer token.
    me = client.Client(Session(module_master.url, token)).users.me()["user"]
    assert me["username"] == "alice"
    assert _status(module_master.url, token, "/api/v1/experiments") == 200

    listed = alice.tokens.list()["tokenInfo"]
    mine = [t for t in listed if int(t["id"]) == token_id]
    assert len(mine) == 1
    info = mine[0]
    assert info["userId"] == users["alice_id"]
    assert info["description"] == "ci pipeline"
    assert info["tokenType"] == "TOKEN_TYPE_ACCESS_TOKEN"
    assert info["revoked"] is False
    assert token not in str(listed)  # the secret is never listed
    assert all("token" not in t for t in listed)

    described = alice.tokens.list(token_ids=[token_id])["tokenInfo"]
    assert [int(t["id"]) for t in described] == [token_id]

    edited = alice.tokens.patch(token_id, description="renamed")["tokenInfo"]
    assert edited["description"] == "renamed"

    # Logging out with an access token leaves it valid (it is revoked explicitly).
    client.Client(Session(module_master.url, token)).users.logout()
    assert _status(module_master.url, token) == 200


def test_revoked_token_is_refused_at_once(module_master: Any, users: dict[str, Any]) -> None:
    alice = users["alice"]
    made = alice.tokens.create(users["alice_id"], None, "to revoke")
    token, token_id = made["token"], int(made["tokenId"])
    # Warm the master's authentication cache, then revoke: the very next request is refused.
    for _ in range(3):
        assert _status(module_master.url, token) == 200
    info = alice.tokens.revoke(token_id)["tokenInfo"]
    assert info["revoked"] is True
    assert _status(module_master.url, token) == 401
    assert _status(module_master.url, token, "/api/v1/experiments") == 401

    # Gone from the default listing, shown with showInactive; a revoked token cannot be edited.
    assert token_id not in [int(t["id"]) for t in alice.tokens.list()["tokenInfo"]]
    inactive = alice.tokens.list(show_inactive=True)["tokenInfo"]
    assert any(int(t["id"]) == token_id and t["revoked"] for t in inactive)
    with pytest.raises(client.APIError) as err:
        alice.tokens.revoke(token_id)
    assert err.value.status == 400 and "revoked or expired" in str(err.value)


def test_expired_token_is_refused(module_master: Any, users: dict[str, Any]) -> None:
    made = users["bob"].tokens.create(users["bob_id"], "1500ms", "short-lived")
    token = made["token"]
    _wait(lambda: _status(module_master.url, token) == 401, "the 1.5 s token to expire")
    inactive = users["bob"].tokens.list(show_inactive=True, token_ids=[made["tokenId"]])
    assert [t["revoked"] for t in inactive["tokenInfo"]] == [False]  # expired, not revoked
    assert users["bob"].tokens.list(token_ids=[made["tokenId"]])["tokenInfo"] == []


def test_who_may_do_what(module_master: Any, users: dict[str, Any]) -> None:
    admin, alice, bob = users["admin"], users["alice"], users["bob"]
    # A user may not create, see or revoke another user's tokens; an admin may.
    with pytest.raises(client.ForbiddenError):
        alice.tokens.create(users["bob_id"], "1h", "")
    made = admin.tokens.create(users["bob_id"], "1h", "made by admin")
    bob_token_id = int(made["tokenId"])
    assert (
        client.Client(Session(module_master.url, made["token"])).users.me()["user"]["username"]
        == "bob"
    )
    assert bob_token_id not in [int(t["id"]) for t in alice.tokens.list()["tokenInfo"]]
    with pytest.raises(client.ForbiddenError):
        alice.tokens.list(username="bob")
    with pytest.raises(client.ForbiddenError):
        alice.tokens.revoke(bob_token_id)
    assert bob_token_id in [int(t["id"]) for t in bob.tokens.list()["tokenInfo"]]
    assert bob_token_id in [int(t["id"]) for t in admin.tokens.list(username="bob")["tokenInfo"]]
    assert admin.tokens.revoke(bob_token_id)["tokenInfo"]["revoked"] is True
    # A deactivated user's tokens stop working.
    token = bob.tokens.create(users["bob_id"], "1h", "")["token"]
    admin.users.patch(users["bob_id"], {"active": False})
    try:
        assert _status(module_master.url, token) == 401
    finally:
        admin.users.patch(users["bob_id"], {"active": True})
    assert _status(module_master.url, token) == 200


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "userId"),
        ({"userId": "x"}, "userId"),
        ({"userId": 1, "lifespan": "soon"}, "lifespan"),
        ({"userId": 1, "lifespan": "-5h"}, "lifespan"),
        ({"userId": 1, "lifespan": 5}, "lifespan"),
        ({"userId": 1, "lifespan": "800h"}, "max_lifespan_days"),
        ({"userId": 1, "description": 3}, "description"),
    ],
)
def test_bad_requests_name_the_field(
    module_master: Any, users: dict[str, Any], body: dict[str, Any], field: str
) -> None:
    with pytest.raises(client.APIError) as err:
        users["admin"].session.request("POST", "/api/v1/tokens", body=body)
    assert err.value.status == 400
    assert field in str(err.value)


def test_unknown_token_and_bad_patch(users: dict[str, Any]) -> None:
    with pytest.raises(client.NotFoundError):
        users["admin"].tokens.revoke(999_999)
    made = users["admin"].tokens.create(users["alice_id"], "1h", "")
    with pytest.raises(client.APIError) as err:
        users["admin"].session.request(
            "PATCH", f"/api/v1/tokens/{made['tokenId']}", body={"setRevoked": "yes"}
        )
    assert err.value.status == 400 and "setRevoked" in str(err.value)


def test_max_lifespan_from_master_config(make_master: Any, sqlite_url: str) -> None:
    handle = make_master(
        sqlite_url, security={"token": {"default_lifespan_days": 1, "max_lifespan_days": 2}}
    )
    admin = client.Client(handle.session("admin"))
    with pytest.raises(client.APIError) as err:
        admin.tokens.create(1, "49h", "")
    assert err.value.status == 400 and "2 days" in str(err.value)
    made = admin.tokens.create(1, None, "default lifespan")
    info = admin.tokens.list(token_ids=[made["tokenId"]])["tokenInfo"][0]
    created = client_time(info["createdAt"])
    expiry = client_time(info["expiry"])
    assert abs((expiry - created).total_seconds() - 86400) < 5
    longest = admin.tokens.create(1, "-1", "longest")
    info = admin.tokens.list(token_ids=[longest["tokenId"]])["tokenInfo"][0]
    assert abs((client_time(info["expiry"]) - client_time(info["createdAt"])).days - 2) <= 1


def client_time(text: str) -> Any:
    import datetime

    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_rbac_off_only_admins_manage_tokens(make_master: Any, sqlite_url: str) -> None:
    """With ``security.authz.type: basic`` upstream's basic rules hold: only admins manage tokens."""
    handle = make_master(sqlite_url, security={"authz": {"type": "basic"}})
    admin = client.Client(handle.session("admin"))
    admin.users.create({"username": "gina", "active": True}, client.hash_password("pw"))
    gina_id = admin.users.get_by_name("gina")["user"]["id"]
    gina = client.Client(handle.session("gina", "pw"))
    with pytest.raises(client.ForbiddenError) as err:
        gina.tokens.create(gina_id, "1h", "")
    assert "CREATE_TOKEN" in str(err.value)
    made = admin.tokens.create(gina_id, "1h", "by admin")
    assert _status(handle.url, made["token"]) == 200
    with pytest.raises(client.ForbiddenError):
        gina.tokens.revoke(made["tokenId"])
    assert admin.tokens.revoke(made["tokenId"])["tokenInfo"]["revoked"] is True
