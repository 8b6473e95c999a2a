"""``det user`` (login, logout, whoami, users) and ``det master`` against a real master."""

from __future__ import annotations

import json

import pytest
import yaml
from cli.harness import Det

from determined.client import Session, TokenStore


def test_login_whoami_logout(det: Det) -> None:
    assert det.ok("u", "whoami").strip() == "You are logged in as user 'determined'"
    code, _, err = det.run("user", "login", "admin", input_text="\n")
    assert code == 0, err
    assert det.ok("u", "whoami").strip() == "You are logged in as user 'admin'"
    store = TokenStore(det.config_dir / "auth.json")
    assert store.active_user(det.url) == "admin" and store.get(det.url, "admin")
    det.ok("u", "logout")
    assert store.get(det.url, "admin") is None
    assert det.ok("u", "whoami").strip() == "You are logged in as user 'determined'"
    det.ok("-u", "admin", "u", "whoami")  # explicit user with the default empty password
    det.ok("u", "logout", "--all")
    assert (
        json.loads((det.config_dir / "auth.json").read_text())["masters"][det.url]["tokens"] == {}
    )


def test_users_create_password_activate(det: Det, api: Session) -> None:
    name = "alice-" + det.config_dir.parent.name[-8:]
    code, _, err = det.run("-u", "admin", "u", "create", name, input_text="pw-one\npw-two\n")
    assert code == 1 and "Passwords do not match" in err
    det.ok("-u", "admin", "u", "create", name, "--password", "First-pw1")
    assert name in det.ok("u", "list")
    assert name in [u["username"] for u in json.loads(det.ok("u", "list", "--json"))]
    code, _, err = det.run("u", "login", name, input_text="wrong\n")
    assert code == 1
    assert err.strip() == f"invalid credentials for user '{name}': check the password"
    code, _, _ = det.run("u", "login", name, input_text="First-pw1\n")
    assert code == 0
    code, _, err = det.run("u", "change-password", input_text="Second-pw2\nSecond-pw2\n")
    assert code == 0, err
    # the CLI signed in again with the new password
    assert det.ok("u", "whoami").strip() == f"You are logged in as user '{name}'"
    det.ok("u", "logout")
    code, _, _ = det.run("u", "login", name, input_text="Second-pw2\n")
    assert code == 0
    det.ok("-u", "admin", "u", "deactivate", name)
    assert name not in det.ok("-u", "admin", "u", "list")
    assert name in det.ok("-u", "admin", "u", "list", "--all")
    code, _, err = det.run("u", "login", name, input_text="Second-pw2\n")
    assert code == 1 and "not active" in err
    det.ok("-u", "admin", "u", "activate", name)
    user = api.request("GET", f"/api/v1/users/{name}/by-username")["user"]
    assert user["active"] is True


def test_not_logged_in_suggests_login(det: Det, api: Session) -> None:
    """When the default user has a password, commands say how to log in (one line, exit 1)."""
    me = api.request("GET", "/api/v1/users/determined/by-username")["user"]
    api.request(
        "POST",
        f"/api/v1/users/{me['id']}/password",
        body={"password": "Locked-1"},
        idempotent=False,
    )
    try:
        code, out, err = det.run("e", "list")
        assert code == 1 and out == ""
        assert len(err.strip().splitlines()) == 1
        assert "det user login" in err and "determined" in err
        code, _, err = det.run("u", "login", "determined", input_text="Locked-1\n")
        assert code == 0, err
        det.ok("e", "list")
    finally:
        api.request(
            "POST", f"/api/v1/users/{me['id']}/password", body={"password": ""}, idempotent=False
        )


def test_master_info_config_logs(det: Det) -> None:
    info = yaml.safe_load(det.ok("master", "info"))
    assert info["version"] and info["clusterId"]
    assert json.loads(det.ok("master", "info", "--json"))["clusterId"] == info["clusterId"]
    config = json.loads(det.ok("-u", "admin", "master", "config", "show", "--json"))
    assert config["checkpoint_storage"]["type"] == "shared_fs"
    assert "checkpoint_storage" in yaml.safe_load(det.ok("-u", "admin", "master", "config"))
    lines = det.ok("master", "logs").splitlines()
    assert any("serving on" in line for line in lines)
    assert len(det.ok("master", "logs", "--tail", "1").splitlines()) == 1


@pytest.mark.parametrize("prog", ["det", "det-cli"])
def test_det_cli_has_the_same_commands(det: Det, prog: str) -> None:
    from determined.cli.__main__ import main, main_det_cli

    det.capsys.readouterr()
    entry = main if prog == "det" else main_det_cli
    assert entry(["u", "whoami"]) == 0
    assert "determined" in det.capsys.readouterr().out


def test_only_det_cli_lists_launch(det: Det) -> None:
    from determined.cli.__main__ import main, main_det_cli

    det.capsys.readouterr()
    assert main_det_cli(["--help"]) == 0
    assert "launch" in det.capsys.readouterr().out
    assert main(["--help"]) == 0
    assert "launch" not in det.capsys.readouterr().out
