"""Upstream's own ``det user-group`` and ``det rbac`` (determined==0.38.1, its own venv) against
det-master: groups, members, role assignment through a group and to a user on a workspace."""

from __future__ import annotations

import os
import pathlib
import subprocess
from typing import Any

import pytest

from determined import client

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_upstream_det_user_group_and_rbac(
    rbac_upstream_master: Any, tmp_path: pathlib.Path
) -> None:
    from e2e.test_upstream_client import _upstream_python

    det = _upstream_python().parent / "det"
    admin = client.Client(rbac_upstream_master.session("admin"))
    admin.users.create({"username": "carol", "active": True}, client.hash_password(""))
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "DET_"))
    }
    env.update(
        {
            "HOME": str(tmp_path),
            "XDG_CONFIG_HOME": str(tmp_path / "config"),
            "DET_MASTER": rbac_upstream_master.url,
            "DET_USER": "admin",
            "DET_PASS": "",
        }
    )

    def run(*argv: str) -> str:
        done = subprocess.run(
            [str(det), *argv], capture_output=True, text=True, env=env, timeout=120
        )
        assert done.returncode == 0, f"det {' '.join(argv)}: {done.stderr}\n{done.stdout}"
        return done.stdout

    assert "user group with name ops and ID" in run(
        "user-group", "create", "ops", "--add-user", "carol"
    )
    assert "ops" in run("user-group", "list")
    assert "carol" in run("user-group", "describe", "ops")
    assert "role 'Viewer' with ID 4" in run("rbac", "list-roles")
    run("rbac", "assign-role", "Viewer", "--group-name-to-assign", "ops")
    out = run(
        "rbac",
        "assign-role",
        "Editor",
        "--username-to-assign",
        "carol",
        "--workspace-name",
        "Uncategorized",
    )
    assert "to workspace Uncategorized" in out
    out = run("rbac", "list-users-roles", "carol")
    assert "Viewer" in out and "Editor" in out and "ops" in out
    assert "Viewer" in run("rbac", "list-groups-roles", "ops")
    assert "role is assigned to groups" in run("rbac", "describe-role", "Viewer")
    assert "global permissions assigned" in run("rbac", "my-permissions")
    run("rbac", "unassign-role", "Viewer", "--group-name-to-assign", "ops")
    run("user-group", "remove-user", "ops", "carol")
    run("user-group", "change-name", "ops", "ops2")
    assert "deleted" in run("user-group", "delete", "ops2", "--yes")
    roles = admin.rbac.roles_of_user(admin.users.get_by_name("carol")["user"]["id"])["roles"]
    assert [r["role"]["name"] for r in roles] == ["Editor"]


@pytest.fixture
def rbac_upstream_master(sqlite_master: Any) -> Any:
    return sqlite_master
