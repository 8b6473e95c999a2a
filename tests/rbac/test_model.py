"""The RBAC model: built-in roles, user groups and role assignments through the REST API, the
typed client and ``det``; a role given through a group applies; unassigning takes it away; bad
input is a 4xx naming the field."""

from __future__ import annotations

import itertools
import json
import pathlib
from collections.abc import Iterator
from typing import Any

import pytest

from determined import client
from determined.master._core._authz import Permission
from determined.master.db import Workspace

_names = itertools.count()


def _unique(prefix: str) -> str:
    return f"{prefix}-{next(_names)}"


@pytest.fixture(scope="module")
def rbac_master(module_db_url: str, make_module_master: Any) -> Any:
    """One master per database kind (SQLite, PostgreSQL) for the module's tests."""
    return make_module_master(module_db_url)


@pytest.fixture(scope="module")
def admin(rbac_master: Any) -> client.Client:
    return client.Client(rbac_master.session("admin"))


def _new_user(rbac_master: Any, admin: client.Client) -> tuple[dict[str, Any], client.Client]:
    name = _unique("user")
    user = admin.users.create({"username": name, "active": True}, client.hash_password(""))["user"]
    return user, client.Client(rbac_master.session(name))


def _new_workspace(rbac_master: Any) -> int:
    with rbac_master.db.write() as session:
        ws = Workspace(name=_unique("ws"))
        session.add(ws)
        session.flush()
        return int(ws.id)


def _db_user(master: Any, user_id: int) -> Any:
    from determined.master.db import User

    with master.db.read() as session:
        user = session.get(User, user_id)
        session.expunge(user)
        return user


def _status(excinfo: pytest.ExceptionInfo[client.APIError]) -> tuple[int, str]:
    return excinfo.value.status, excinfo.value.message


def test_built_in_roles(admin: client.Client) -> None:
    roles = {r["name"]: r for r in admin.rbac.list_roles()["roles"]}
    assert {"ClusterAdmin", "WorkspaceAdmin", "WorkspaceCreator", "Viewer", "Editor"} <= set(roles)
    assert roles["Viewer"]["roleId"] == 4 and roles["Editor"]["roleId"] == 5
    viewer = {p["id"] for p in roles["Viewer"]["permissions"]}
    assert "PERMISSION_TYPE_VIEW_EXPERIMENT_METADATA" in viewer
    assert "PERMISSION_TYPE_UPDATE_EXPERIMENT" not in viewer
    assignable = {r["name"] for r in admin.rbac.roles_assignable(workspace_id=1)["roles"]}
    assert "Viewer" in assignable and "ClusterAdmin" not in assignable
    found = admin.rbac.roles_by_ids([5])["roles"][0]
    assert found["role"]["name"] == "Editor"


def test_groups_through_rest(rbac_master: Any, admin: client.Client) -> None:
    alice, _ = _new_user(rbac_master, admin)
    bob, bob_api = _new_user(rbac_master, admin)
    name = _unique("group")
    group = admin.groups.create(name, [alice["id"]])["group"]
    assert [u["username"] for u in group["users"]] == [alice["username"]]
    found = admin.groups.search(name=name)["groups"]
    assert [(g["group"]["groupId"], g["numMembers"]) for g in found] == [(group["groupId"], 1)]
    group = admin.groups.update(
        group["groupId"], add_users=[bob["id"]], remove_users=[alice["id"]]
    )["group"]
    assert [u["id"] for u in group["users"]] == [bob["id"]]
    mine = bob_api.groups.search(user_id=bob["id"])["groups"]
    assert group["groupId"] in [g["group"]["groupId"] for g in mine]
    renamed = _unique("renamed")
    assert admin.groups.update(group["groupId"], name=renamed)["group"]["name"] == renamed

    # a user without UPDATE_GROUP is refused with the permission named, and nothing changes
    with pytest.raises(client.APIError) as e:
        bob_api.groups.create(_unique("mine"))
    status, message = _status(e)
    assert status == 403 and "PERMISSION_TYPE_UPDATE_GROUP" in message
    with pytest.raises(client.APIError) as e:
        bob_api.groups.delete(group["groupId"])
    assert _status(e)[0] == 403
    assert admin.groups.get(group["groupId"])["group"]["name"] == renamed

    admin.groups.delete(group["groupId"])
    with pytest.raises(client.APIError) as e:
        admin.groups.get(group["groupId"])
    assert _status(e)[0] == 404


def test_group_bad_input(rbac_master: Any, admin: client.Client) -> None:
    session = admin.session
    cases = [
        ({"name": ""}, "name"),
        ({"name": 7}, "name"),
        ({"name": _unique("g"), "addUsers": "alice"}, "addUsers"),
        ({"name": _unique("g"), "addUsers": [True]}, "addUsers"),
    ]
    for body, field in cases:
        with pytest.raises(client.APIError) as e:
            session.request("POST", "/api/v1/groups", body=body)
        status, message = _status(e)
        assert status == 400 and message.startswith(field), (body, message)
    with pytest.raises(client.APIError) as e:
        admin.groups.create(_unique("g"), [999_999])
    assert _status(e)[0] == 404 and "999999" in _status(e)[1]
    name = _unique("dup")
    group = admin.groups.create(name)["group"]
    with pytest.raises(client.APIError) as e:
        admin.groups.create(name)
    assert _status(e)[0] == 409 and _status(e)[1].startswith("name")
    with pytest.raises(client.APIError) as e:
        admin.groups.update(group["groupId"], remove_users=[1])
    assert _status(e)[0] == 400 and _status(e)[1].startswith("removeUsers")
    with pytest.raises(client.APIError) as e:
        session.request("GET", "/api/v1/groups/abc")
    assert _status(e)[0] == 400 and "groupId" in _status(e)[1]


def test_role_through_group_applies_and_unassign_removes_it(
    rbac_master: Any, admin: client.Client
) -> None:
    authz = rbac_master.manager.authz
    user, user_api = _new_user(rbac_master, admin)
    ws = _new_workspace(rbac_master)
    view = Permission.VIEW_EXPERIMENT_METADATA
    principal = _db_user(rbac_master, user["id"])

    # a new user: Editor on the default workspace only
    assert authz.can(principal, Permission.CREATE_EXPERIMENT, 1)
    assert not authz.can(principal, view, ws)
    assert authz.visible_workspace_ids(principal) == {1}
    assert authz.visible_workspace_ids(_db_user(rbac_master, 1)) is None  # admin

    group = admin.groups.create(_unique("viewers"), [user["id"]])["group"]
    admin.rbac.assign(4, group_id=group["groupId"], workspace_id=ws)
    admin.rbac.assign(4, group_id=group["groupId"], workspace_id=ws)  # twice: a no-op
    assert authz.can(principal, view, ws)
    assert not authz.can(principal, Permission.UPDATE_EXPERIMENT, ws)
    assert authz.visible_workspace_ids(principal) == {1, ws}
    with pytest.raises(Exception) as e:
        authz.check(principal, Permission.UPDATE_EXPERIMENT, ws)
    assert "PERMISSION_TYPE_UPDATE_EXPERIMENT" in str(e.value) and f"workspace {ws}" in str(e.value)

    summary = user_api.rbac.permissions_summary()
    by_role = {a["roleId"]: a for a in summary["assignments"]}
    assert by_role[4]["scopeWorkspaceIds"] == [ws] and by_role[5]["scopeWorkspaceIds"] == [1]
    assert [r["role"]["name"] for r in admin.rbac.roles_of_user(user["id"])["roles"]] == ["Viewer"]
    of_group = admin.rbac.roles_of_group(group["groupId"])
    assert [r["name"] for r in of_group["roles"]] == ["Viewer"]
    holders = admin.rbac.roles_by_ids([4])["roles"][0]["groupRoleAssignments"]
    assert {"groupId": group["groupId"], "roleAssignment": holders[0]["roleAssignment"]} in holders

    on_ws = user_api.rbac.roles_on_workspace(ws)
    assert [g["groupId"] for g in on_ws["groups"]] == [group["groupId"]]
    assert [a["role"]["name"] for a in on_ws["assignments"]] == ["Viewer"]

    # the member may not hand out roles: ASSIGN_ROLES is missing
    with pytest.raises(client.APIError) as e:
        user_api.rbac.assign(5, user_id=user["id"], workspace_id=ws)
    assert _status(e)[0] == 403 and "PERMISSION_TYPE_ASSIGN_ROLES" in _status(e)[1]

    admin.rbac.unassign(4, group_id=group["groupId"], workspace_id=ws)
    assert not authz.can(principal, view, ws)
    assert authz.visible_workspace_ids(principal) == {1}

    # a direct assignment, cluster-wide, then removing the user from... the role
    admin.rbac.assign(4, user_id=user["id"])
    assert authz.visible_workspace_ids(principal) is None
    admin.rbac.unassign(4, user_id=user["id"])
    assert authz.visible_workspace_ids(principal) == {1}

    # leaving a group takes its roles away
    admin.rbac.assign(2, group_id=group["groupId"], workspace_id=ws)
    assert authz.can(principal, Permission.DELETE_WORKSPACE, ws)
    admin.groups.update(group["groupId"], remove_users=[user["id"]])
    assert not authz.can(principal, Permission.DELETE_WORKSPACE, ws)


def test_assignment_bad_input(rbac_master: Any, admin: client.Client) -> None:
    user, _ = _new_user(rbac_master, admin)
    session = admin.session
    path = "/api/v1/roles/add-assignments"

    def refused(body: dict[str, Any]) -> tuple[int, str]:
        with pytest.raises(client.APIError) as e:
            session.request("POST", path, body=body)
        return _status(e)

    status, message = refused({})
    assert status == 400 and "userRoleAssignments" in message
    status, message = refused(
        {"userRoleAssignments": [{"roleAssignment": {"role": {"roleId": 4}}}]}
    )
    assert status == 400 and message == "userRoleAssignments[0].userId: required"
    status, message = refused({"userRoleAssignments": [{"userId": user["id"]}]})
    assert status == 400 and message == "userRoleAssignments[0].roleAssignment: required"
    ra = {"role": {"roleId": "viewer"}}
    status, message = refused(
        {"userRoleAssignments": [{"userId": user["id"], "roleAssignment": ra}]}
    )
    assert status == 400 and message.startswith("userRoleAssignments[0].roleAssignment.role.roleId")
    ra = {"role": {"roleId": 77}}
    status, message = refused(
        {"userRoleAssignments": [{"userId": user["id"], "roleAssignment": ra}]}
    )
    assert status == 404 and "role 77 not found" in message
    ra = {"role": {"roleId": 1}, "scopeWorkspaceId": 1}
    status, message = refused(
        {"userRoleAssignments": [{"userId": user["id"], "roleAssignment": ra}]}
    )
    assert status == 400 and "scopeWorkspaceId" in message and "cluster-wide" in message
    ra = {"role": {"roleId": 4}, "scopeWorkspaceId": 999_999}
    status, message = refused(
        {"userRoleAssignments": [{"userId": user["id"], "roleAssignment": ra}]}
    )
    assert status == 404 and message.startswith("scopeWorkspaceId")
    ra = {"role": {"roleId": 4}}
    status, message = refused(
        {"groupRoleAssignments": [{"groupId": 999_999, "roleAssignment": ra}]}
    )
    assert status == 404 and message.startswith("groupId")
    with pytest.raises(client.APIError) as e:
        admin.rbac.unassign(4, user_id=user["id"], workspace_id=1)
    assert _status(e)[0] == 404 and "has no role Viewer" in _status(e)[1]
    assert admin.rbac.roles_of_user(user["id"])["roles"] == []


@pytest.fixture
def det(
    rbac_master: Any, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> Iterator[Any]:
    from cli.harness import Det

    for name in ("DET_USER", "DET_PASS", "DET_USER_TOKEN", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DET_MASTER", rbac_master.url)
    monkeypatch.setenv("DET_CONFIG_DIR", str(tmp_path / "det-config"))
    yield Det(rbac_master.url, tmp_path / "det-config", capsys)


def test_cli_user_groups_and_roles(rbac_master: Any, admin: client.Client, det: Any) -> None:
    alice, _ = _new_user(rbac_master, admin)
    bob, _ = _new_user(rbac_master, admin)
    a = ["-u", "admin"]
    group = _unique("team")
    out = det.ok(*a, "user-group", "create", group, "--add-user", alice["username"])
    assert f"user group with name {group} and ID" in out and alice["username"] in out
    assert group in det.ok(*a, "user-group", "list")
    listed = json.loads(det.ok(*a, "user-group", "ls", "--json"))
    assert group in [g["group"]["name"] for g in listed["groups"]]
    out = det.ok(*a, "user-group", "add-user", group, bob["username"])
    assert f"user added to group with username {bob['username']}" in out
    described = json.loads(det.ok(*a, "user-group", "describe", group, "--json"))
    assert {u["username"] for u in described["users"]} == {alice["username"], bob["username"]}
    det.ok(*a, "user-group", "remove-user", group, alice["username"])
    mine = det.ok(*a, "user-group", "list", "--groups-user-belongs-to", alice["username"])
    assert group not in mine

    assert "role 'Viewer' with ID 4" in det.ok(*a, "rbac", "list-roles")
    assert "ClusterAdmin" not in det.ok(*a, "rbac", "list-roles", "--exclude-global-roles")
    out = det.ok(*a, "rbac", "assign-role", "Viewer", "--group-name-to-assign", group)
    assert out.strip().endswith("globally") and f"group '{group}'" in out
    assert "Viewer" in det.ok(*a, "rbac", "list-groups-roles", group)
    assert "Viewer" in det.ok(*a, "rbac", "list-users-roles", bob["username"])
    out = det.ok(*a, "rbac", "describe-role", "Viewer")
    assert "role is assigned to groups" in out and group in out
    det.ok(*a, "rbac", "unassign-role", "Viewer", "--group-name-to-assign", group)
    assert "user has no role assignments" in det.ok(*a, "rbac", "list-users-roles", bob["username"])
    out = det.ok(*a, "rbac", "assign-role", "Editor", "--username-to-assign", bob["username"])
    assert f"user '{bob['username']}'" in out

    code, _, err = det.run(*a, "rbac", "assign-role", "Viewer")
    assert code == 1 and "exactly one of --username-to-assign or --group-name-to-assign" in err
    code, _, err = det.run(*a, "rbac", "assign-role", "Nobody", "--username-to-assign", "x")
    assert code == 1 and "could not find" in err
    code, _, err = det.run(*a, "user-group", "add-user", group, "no-such-user")
    assert code == 1 and "could not find users for usernames no-such-user" in err
    code, _, err = det.run("-u", bob["username"], "user-group", "create", _unique("nope"))
    assert code == 1 and "PERMISSION_TYPE_UPDATE_GROUP" in err

    assert "global permissions assigned" in det.ok("-u", "admin", "rbac", "my-permissions")
    out = det.ok("-u", bob["username"], "rbac", "my-permissions")
    assert "global permissions assigned" in out and "PERMISSION_TYPE_CREATE_EXPERIMENT" in out
    assert "permissions assigned over workspace 'Uncategorized' with ID '1'" in out

    det.ok(*a, "user-group", "change-name", group, group + "-x")
    out = det.ok(*a, "user-group", "delete", group + "-x", "--yes")
    assert "deleted" in out
    assert group + "-x" not in det.ok(*a, "user-group", "list")


def test_rbac_off(make_master: Any) -> None:
    m = make_master(security={"authz": {"type": "basic"}})
    admin = client.Client(m.session("admin"))
    user = admin.users.create({"username": "plain", "active": True}, client.hash_password(""))[
        "user"
    ]
    principal = _db_user(m, user["id"])
    authz = m.manager.authz
    assert not authz.enabled
    assert authz.can(principal, Permission.DELETE_EXPERIMENT, 12345)
    assert authz.visible_workspace_ids(principal) is None
    assert not authz.can(principal, Permission.UPDATE_GROUP)
    assert admin.master.info()["rbacEnabled"] is False
