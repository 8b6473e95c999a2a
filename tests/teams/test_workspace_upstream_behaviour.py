"""Workspaces and the tasks in them, as upstream's e2e ``test_workspace_org.py`` expects: deleting a
workspace stops its running commands/notebooks/TensorBoards/shells (instead of refusing), an
archived (or unknown) workspace takes no new task (404), a command config without ``entrypoint``
is accepted (it runs nothing), and the task lists take ``workspaceId`` and leave out the tasks of
deleted workspaces.

One SQLite master serves the module; each test makes its own workspaces.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from tasks.harness import wait_command

from determined.client import APIError, Client, NotFoundError

_names = itertools.count()


@pytest.fixture(scope="module")
def admin(module_master: Any) -> Client:
    return Client(module_master.session("admin"))


def _workspace(admin: Client) -> int:
    made = admin.workspaces.create(f"upstream-behaviour-{next(_names)}")
    return int(made["workspace"]["id"])


def _launch(api: Client, body: dict[str, Any]) -> dict[str, Any]:
    return dict(api.session.request("POST", "/api/v1/commands", body=body)["command"])


def _listed(api: Client, route: str, key: str, **params: Any) -> list[str]:
    return [t["id"] for t in api.session.request("GET", route, params=params or None)[key]]


def test_deleting_a_workspace_stops_its_running_tasks(admin: Client) -> None:
    doomed, other = _workspace(admin), _workspace(admin)
    inside = _launch(admin, {"config": {"entrypoint": "sleep 300"}, "workspaceId": doomed})
    outside = _launch(admin, {"config": {"entrypoint": "sleep 300"}, "workspaceId": other})
    for command in (inside, outside):
        wait_command(admin, command["id"], "STATE_RUNNING")
    assert _listed(admin, "/api/v1/commands", "commands", workspaceId=doomed) == [inside["id"]]

    deleted = admin.session.request("DELETE", f"/api/v1/workspaces/{doomed}")
    assert deleted == {"completed": True}
    with pytest.raises(NotFoundError):
        admin.workspaces.get(doomed)

    # the stopped command ends, keeps its record, and is no longer listed
    assert wait_command(admin, inside["id"]) == "STATE_TERMINATED"
    ended = admin.commands.get(inside["id"])["command"]
    assert f"workspace {doomed} was deleted" in ended["exitStatus"]
    assert inside["id"] not in _listed(admin, "/api/v1/commands", "commands")
    with pytest.raises(NotFoundError) as info:
        _listed(admin, "/api/v1/commands", "commands", workspaceId=doomed)
    assert "workspaceId" in str(info.value)
    with pytest.raises(NotFoundError):
        _listed(admin, "/api/v1/notebooks", "notebooks", workspaceId=doomed)

    # the other workspace's command runs on
    assert admin.commands.get(outside["id"])["command"]["state"] == "STATE_RUNNING"
    assert outside["id"] in _listed(admin, "/api/v1/commands", "commands", workspaceId=other)
    admin.session.request("DELETE", f"/api/v1/workspaces/{other}")
    assert wait_command(admin, outside["id"]) == "STATE_TERMINATED"


def test_deleting_a_workspace_stops_a_task_still_waiting_for_slots(admin: Client) -> None:
    ws, other = _workspace(admin), _workspace(admin)
    every_slot = {"entrypoint": "sleep 300", "resources": {"slots": 4}}  # the master has 4
    holder = _launch(admin, {"config": every_slot, "workspaceId": other})
    wait_command(admin, holder["id"], "STATE_RUNNING")
    one_slot = {"entrypoint": "sleep 300", "resources": {"slots": 1}}
    queued = _launch(admin, {"config": one_slot, "workspaceId": ws})
    assert admin.commands.get(queued["id"])["command"]["state"] == "STATE_QUEUED"

    admin.session.request("DELETE", f"/api/v1/workspaces/{ws}")
    # it ends without ever running, and its record stays (GET by id answers)
    assert wait_command(admin, queued["id"]) == "STATE_TERMINATED"
    assert (
        f"workspace {ws} was deleted" in admin.commands.get(queued["id"])["command"]["exitStatus"]
    )
    assert admin.commands.get(holder["id"])["command"]["state"] == "STATE_RUNNING"
    admin.commands.kill(holder["id"])
    assert wait_command(admin, holder["id"]) == "STATE_TERMINATED"
    admin.session.request("DELETE", f"/api/v1/workspaces/{other}")


def test_an_archived_or_unknown_workspace_takes_no_new_task(admin: Client) -> None:
    ws = _workspace(admin)
    admin.session.request("POST", f"/api/v1/workspaces/{ws}/archive")
    for route in ("/api/v1/commands", "/api/v1/notebooks", "/api/v1/tensorboards"):
        with pytest.raises(NotFoundError) as info:
            admin.session.request(
                "POST", route, body={"config": {"entrypoint": "true"}, "workspaceId": ws}
            )
        assert "workspaceId" in str(info.value) and str(ws) in str(info.value)
    with pytest.raises(NotFoundError):
        _launch(admin, {"config": {"entrypoint": "true"}, "workspaceId": 987654})
    admin.session.request("POST", f"/api/v1/workspaces/{ws}/unarchive")
    command = _launch(admin, {"config": {"entrypoint": "true"}, "workspaceId": ws})
    assert command["workspaceId"] == ws
    assert wait_command(admin, command["id"]) == "STATE_TERMINATED"
    admin.session.request("DELETE", f"/api/v1/workspaces/{ws}")


def test_a_command_without_an_entrypoint_runs_nothing(admin: Client) -> None:
    ws = _workspace(admin)
    command = _launch(admin, {"workspaceId": ws})
    assert command["workspaceId"] == ws
    assert command["description"] == "Command (no entrypoint)"
    assert admin.commands.get(command["id"])["command"]["workspaceId"] == ws
    assert wait_command(admin, command["id"]) == "STATE_TERMINATED"
    assert admin.commands.get(command["id"])["command"]["exitStatus"] == "exited with code 0"
    assert _listed(admin, "/api/v1/commands", "commands", workspaceId=ws) == [command["id"]]
    # an empty command line is still refused, naming the field
    with pytest.raises(APIError) as info:
        _launch(admin, {"config": {"entrypoint": "  "}, "workspaceId": ws})
    assert info.value.status_code == 400 and "config.entrypoint" in str(info.value)
    admin.session.request("DELETE", f"/api/v1/workspaces/{ws}")


def test_projects_and_pins_as_upstream(admin: Client, module_master: Any) -> None:
    """The default workspace takes no project (created or moved in); a project of an archived
    workspace shows as archived; names sort by their letters and digits, regardless of case and
    punctuation; a new workspace is pinned for its creator only."""
    from determined import client

    with pytest.raises(APIError) as info:
        admin.projects.create(1, "not-here")
    assert info.value.status_code == 400 and "default workspace" in str(info.value)
    ws = _workspace(admin)
    names = ["_TestPRJ", "_TestEarly", "_TestPatchedProject"]
    made = [admin.projects.create(ws, name)["project"] for name in names]
    with pytest.raises(APIError) as info:
        admin.projects.move(made[0]["id"], 1)
    assert info.value.status_code == 400 and "destinationWorkspaceId" in str(info.value)

    by_name = admin.session.request(
        "GET", f"/api/v1/workspaces/{ws}/projects", params={"sortBy": "SORT_BY_NAME"}
    )["projects"]
    assert [p["name"] for p in by_name] == ["_TestEarly", "_TestPatchedProject", "_TestPRJ"]
    down = admin.session.request(
        "GET",
        f"/api/v1/workspaces/{ws}/projects",
        params={"sortBy": "SORT_BY_NAME", "orderBy": "ORDER_BY_DESC"},
    )["projects"]
    assert [p["name"] for p in down] == ["_TestPRJ", "_TestPatchedProject", "_TestEarly"]
    listed = admin.session.request(
        "GET", "/api/v1/workspaces", params={"sortBy": "SORT_BY_NAME", "name": "_sort%"}
    )["workspaces"]
    assert listed == []
    for name in ("_SortB", "sorta", "_sortC"):
        admin.workspaces.create(name)
    listed = admin.session.request(
        "GET", "/api/v1/workspaces", params={"sortBy": "SORT_BY_NAME", "name": "%sort%"}
    )["workspaces"]
    assert [w["name"] for w in listed] == ["sorta", "_SortB", "_sortC"]

    admin.session.request("POST", f"/api/v1/workspaces/{ws}/archive")
    assert admin.projects.get(made[0]["id"])["project"]["archived"] is True
    admin.session.request("POST", f"/api/v1/workspaces/{ws}/unarchive")
    assert admin.projects.get(made[0]["id"])["project"]["archived"] is False

    assert admin.workspaces.get(ws)["workspace"]["pinned"] is True
    name = f"pin-viewer-{next(_names)}"
    admin.users.create({"username": name, "active": True}, client.hash_password(""))
    admin.rbac.assign(4, user_id=admin.users.get_by_name(name)["user"]["id"], workspace_id=ws)
    viewer = Client(module_master.session(name))
    assert viewer.workspaces.get(ws)["workspace"]["pinned"] is False


def test_basic_authorization_owners_change_workspaces_and_projects(
    make_module_master: Any,
) -> None:
    """RBAC off (``security.authz.type: basic``): only an admin or the owner archives, unarchives,
    renames or deletes a workspace (403 for others), and a project also its workspace's owner;
    ``rbac_ui_enabled: true`` makes ``GET /api/v1/master`` say ``rbacEnabled`` (upstream's
    clients then offer groups and roles, which stay admin-only)."""
    from determined import client

    master = make_module_master(security={"authz": {"type": "basic", "rbac_ui_enabled": True}})
    admin = Client(master.session("admin"))
    assert admin.master.info()["rbacEnabled"] is True
    for name in ("ws-owner", "stranger"):
        admin.users.create({"username": name, "active": True}, client.hash_password(""))
    owner, stranger = Client(master.session("ws-owner")), Client(master.session("stranger"))
    ws = _workspace(owner)
    theirs = owner.projects.create(ws, "owners")["project"]["id"]
    own = stranger.projects.create(ws, "strangers")["project"]["id"]  # basic: anyone creates

    def refused(call: Any) -> None:
        with pytest.raises(APIError) as info:
            call()
        assert info.value.status_code == 403, str(info.value)
        assert "only an admin or its owner" in str(info.value)

    for path in ("archive", "unarchive"):
        refused(lambda p=path: stranger.session.request("POST", f"/api/v1/workspaces/{ws}/{p}"))
        refused(lambda p=path: stranger.session.request("POST", f"/api/v1/workspaces/1/{p}"))
        refused(lambda p=path: stranger.session.request("POST", f"/api/v1/projects/{theirs}/{p}"))
    refused(lambda: stranger.workspaces.patch(ws, name="taken-over"))
    refused(lambda: stranger.session.request("DELETE", f"/api/v1/workspaces/{ws}"))
    refused(lambda: stranger.session.request("DELETE", "/api/v1/workspaces/1"))
    refused(lambda: stranger.projects.patch(theirs, name="taken-over"))
    refused(lambda: stranger.projects.delete(theirs))
    refused(lambda: stranger.session.request("DELETE", "/api/v1/projects/1"))
    with pytest.raises(APIError) as info:  # editing the default workspace: the 400 comes first
        stranger.workspaces.patch(1, name="renamed")
    assert info.value.status_code == 400 and "default workspace" in str(info.value)
    assert owner.workspaces.get(ws)["workspace"]["archived"] is False

    stranger.projects.archive(own)  # its own project, in someone else's workspace
    owner.projects.unarchive(own)  # the workspace's owner
    owner.projects.patch(theirs, description="still theirs")
    owner.workspaces.patch(ws, name=f"renamed-{next(_names)}")
    admin.session.request("POST", f"/api/v1/workspaces/{ws}/archive")
    owner.session.request("POST", f"/api/v1/workspaces/{ws}/unarchive")
    assert stranger.projects.delete(own) == {"completed": True}
    assert owner.session.request("DELETE", f"/api/v1/workspaces/{ws}") == {"completed": True}


def test_rbac_ui_enabled_must_be_a_boolean() -> None:
    from determined.master._config import MasterConfig

    config = MasterConfig(security={"authz": {"type": "basic", "rbac_ui_enabled": "yes"}})
    with pytest.raises(ValueError, match="security.authz.rbac_ui_enabled"):
        config.check()
    assert MasterConfig(security={"authz": {"type": "basic"}}).rbac_ui_enabled() is False
    assert MasterConfig().rbac_ui_enabled() is True
