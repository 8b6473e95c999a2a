"""``det token create/list/describe/edit/revoke/login`` and ``det user edit/rename`` against a real
master, in-process (``det.run``) and one round through the installed ``det`` script."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest
import requests
from cli.harness import Det

from determined import client
from determined.master import _auth


@pytest.fixture
def det(
    module_master: Any,
    tmp_path: pathlib.Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> Det:
    """``det`` against the module's master with a private token cache, logged in as admin."""
    for name in ("DET_USER", "DET_PASS", "DET_USER_TOKEN", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DET_MASTER", module_master.url)
    monkeypatch.setenv("DET_CONFIG_DIR", str(tmp_path / "det-config"))
    runner = Det(module_master.url, tmp_path / "det-config", capsys)
    code, _, err = runner.run("user", "login", "admin", input_text="\n")
    assert code == 0, err
    return runner


@pytest.fixture(scope="module")
def admin(module_master: Any) -> client.Client:
    return client.Client(module_master.session("admin"))


def _me(url: str, token: str) -> int:
    return requests.get(
        url + "/api/v1/me", headers={"Authorization": f"Bearer {token}"}, timeout=30
    ).status_code


def test_token_commands(det: Det, module_master: Any, admin: client.Client) -> None:
    admin.users.create({"username": "carol", "active": True}, client.hash_password("pw"))
    out = det.ok("token", "create", "carol", "-e", "2", "-d", "nightly job")
    lines = dict(line.split(": ", 1) for line in out.strip().splitlines())
    token_id, token = int(lines["TokenID"]), lines["Access-Token"]
    assert _me(module_master.url, token) == 200

    listing = det.ok("token", "list", "--json")
    infos = json.loads(listing)
    mine = [t for t in infos if t["id"] == token_id]
    assert mine and mine[0]["description"] == "nightly job"
    assert token not in listing
    table = det.ok("tkn", "ls", "carol")
    assert "nightly job" in table and "ID" in table.splitlines()[0]

    described = json.loads(det.ok("token", "describe", str(token_id), "--json"))
    assert [t["id"] for t in described] == [token_id]
    created, expiry = described[0]["createdAt"], described[0]["expiry"]
    assert created < expiry

    assert "Successfully updated" in det.ok("token", "edit", str(token_id), "-d", "renamed")
    assert (
        json.loads(det.ok("token", "describe", str(token_id), "--json"))[0]["description"]
        == "renamed"
    )

    assert f"revoked token {token_id}" in det.ok("token", "revoke", str(token_id))
    assert _me(module_master.url, token) == 401
    assert token_id not in [t["id"] for t in json.loads(det.ok("token", "list", "--json"))]
    shown = json.loads(det.ok("token", "list", "--show-inactive", "--json"))
    assert any(t["id"] == token_id and t["revoked"] for t in shown)

    code, _, err = det.run("token", "revoke", "987654")
    assert code != 0 and "not found" in err
    code, _, err = det.run("token", "describe", "987654")
    assert code != 0 and "987654" in err


def test_token_login_then_commands_act_as_that_user(det: Det, admin: client.Client) -> None:
    admin.users.create({"username": "dave", "active": True}, client.hash_password("pw"))
    dave_id = admin.users.get_by_name("dave")["user"]["id"]
    made = admin.tokens.create(dave_id, "1h", "for det token login")
    assert "Authenticated as dave" in det.ok("token", "login", made["token"])
    assert "'dave'" in det.ok("user", "whoami")
    # dave's own token listing shows it; dave may not create one for admin.
    assert made["tokenId"] in [t["id"] for t in json.loads(det.ok("token", "list", "--json"))]
    code, _, err = det.run("token", "create", "admin")
    assert code != 0 and "admin" in err
    admin.tokens.revoke(made["tokenId"])
    code, _, err = det.run("token", "login", "--", made["token"])  # how a leading "-" is passed
    assert code != 0 and "refused" in err


def test_a_new_token_never_starts_with_a_dash() -> None:
    """A command line takes a leading ``-`` for an option: one token in 64 made ``det token login
    TOKEN`` fail with "the following arguments are required" (seen in a fresh-clone run)."""
    assert not any(_auth.new_token().startswith("-") for _ in range(5000))


def test_user_edit_and_rename(det: Det, admin: client.Client, module_master: Any) -> None:
    admin.users.create({"username": "erin", "active": True}, client.hash_password("pw"))
    out = det.ok("user", "edit", "erin", "--display-name", "Erin E.", "--admin", "true")
    assert "Display Name" in out and "Admin" in out
    user = admin.users.get_by_name("erin")["user"]
    assert user["displayName"] == "Erin E." and user["admin"] is True

    det.ok("user", "edit", "erin", "--active", "false", "--admin", "false")
    user = admin.users.get(user["id"])["user"]
    assert user["active"] is False and user["admin"] is False
    det.ok("user", "edit", "erin", "--active", "true", "--remote", "false")
    assert admin.users.get(user["id"])["user"]["active"] is True

    det.ok("user", "edit", "erin", "--username", "erin2")
    assert admin.users.get(user["id"])["user"]["username"] == "erin2"
    assert "Renamed user 'erin2' to 'erin3'" in det.ok("user", "rename", "erin2", "erin3")
    assert admin.users.get(user["id"])["user"]["username"] == "erin3"
    # The renamed user logs in under the new name with the same password.
    assert module_master.login("erin3", "pw")

    code, _, err = det.run("user", "edit", "erin3")
    assert code != 0 and "No field provided" in err
    code, _, err = det.run("user", "rename", "erin3", "admin")
    assert code != 0 and "already exists" in err
    code, _, err = det.run("user", "edit", "erin3", "--admin", "maybe")
    assert code != 0 and "true or false" in err


def test_user_edit_needs_admin_for_privileged_fields(
    det: Det, admin: client.Client, module_master: Any
) -> None:
    """The SDK's ``User`` methods and the same refusal for a non-admin through ``det``."""
    from determined.experimental import Determined

    admin.users.create({"username": "frank", "active": True}, client.hash_password("pw"))
    frank_session = module_master.session("frank", "pw")
    sdk = Determined._from_session(frank_session)
    me = sdk.whoami()
    me.change_display_name("Frank F.")
    assert admin.users.get(me.user_id)["user"]["displayName"] == "Frank F."
    with pytest.raises(client.ForbiddenError):
        me.rename("frankie")
    admin_sdk = Determined._from_session(module_master.session("admin"))
    target = admin_sdk.get_user_by_name("frank")
    target.rename("frankie")
    assert target.username == "frankie"
    target.rename("frank")

    client.TokenStore().set(module_master.url, "frank", frank_session.token or "")
    code, _, err = det.run("user", "edit", "admin", "--display-name", "x")
    assert code != 0 and "only an admin" in err


def test_installed_script_round_trip(det: Det, module_master: Any) -> None:
    """One pass through the installed ``det`` script: create, describe, revoke."""
    env_login = det.sh("user", "login", "admin", input_text="\n")
    assert env_login.returncode == 0, env_login.stderr
    made = det.sh("token", "create", "-d", "script", "--json")
    assert made.returncode == 0, made.stderr
    answer = json.loads(made.stdout)
    assert _me(module_master.url, answer["token"]) == 200
    revoked = det.sh("token", "revoke", str(answer["tokenId"]))
    assert revoked.returncode == 0, revoked.stderr
    assert _me(module_master.url, answer["token"]) == 401
