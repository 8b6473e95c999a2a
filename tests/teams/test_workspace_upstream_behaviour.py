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
