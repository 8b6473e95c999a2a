"""Workspaces through the REST API (upstream's routes and JSON shapes), ``det workspace`` and the
SDK's ``Workspace`` and ``Determined.create/get/list/delete_workspace``.

One SQLite master serves the module (each test names its own workspaces); the CRUD test also runs
on PostgreSQL. Experiments are created paused unless a test needs one to finish.
"""

from __future__ import annotations

import itertools
import json
import pathlib
import time
from typing import Any

import pytest

from determined import client
from determined.client import APIError, Client, NotFoundError

_names = itertools.count()


def _unique(prefix: str) -> str:
    return f"{prefix}-{next(_names)}"


def _config(**overrides: Any) -> dict[str, Any]:
    config: dict[str, Any] = {
        "name": "workspaces-test",
        "entrypoint": "python3 train.py",
        "searcher": {"name": "single", "metric": "loss", "max_length": {"batches": 1}},
        "hyperparameters": {},
        "max_restarts": 0,
        "resources": {"slots_per_trial": 0},
    }
    config.update(overrides)
    return config


def _refused(status: int, call: Any, *fragments: str) -> str:
    with pytest.raises(APIError) as info:
        call()
    assert info.value.status == status, str(info.value)
    for fragment in fragments:
        assert fragment in str(info.value), str(info.value)
    return str(info.value)


@pytest.fixture(scope="module")
def context(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    path = tmp_path_factory.mktemp("context")
    (path / "train.py").write_text("print('hello')\n")
    return path


@pytest.fixture(scope="module")
def admin(module_master: Any) -> Client:
    return Client(module_master.session("admin"))


def _user(admin: Client, master: Any, name: str) -> tuple[int, Client]:
    user = admin.users.create({"username": name, "active": True}, client.hash_password(""))
    return int(user["user"]["id"]), Client(master.session(name))


# ---- REST ---------------------------------------------------------------------------------------


def test_workspace_crud_and_validation(master: Any) -> None:
    """On SQLite and PostgreSQL: create, list, get, patch, archive, pin, delete in upstream's
    shapes; every bad input a 4xx naming the field; the default workspace cannot be changed."""
    api = Client(master.session("admin"))
    default = api.workspaces.get(1)["workspace"]
    assert (default["name"], default["immutable"], default["numProjects"]) == (
        "Uncategorized",
        True,
        1,
    )
    made = api.workspaces.create(
        "Team-A",
        agent_user_group={"agentUid": 1000, "agentGid": 1000, "agentUser": "a", "agentGroup": "g"},
        checkpoint_storage_config={
            "type": "s3",
            "bucket": "b",
            "access_key": "AKIA",
            "secret_key": "hush",
        },
        default_compute_pool="default",
    )
    ws = made["workspace"]
    assert made["namespaceBindings"] == {}
    assert ws["id"] > 1 and ws["name"] == "Team-A" and ws["username"] == "admin"
    assert ws["agentUserGroup"] == {
        "agentUid": 1000,
        "agentGid": 1000,
        "agentUser": "a",
        "agentGroup": "g",
    }
    storage = ws["checkpointStorageConfig"]
    assert storage["bucket"] == "b" and storage["secret_key"] == "********"
    assert storage["access_key"] == "********"
    assert ws["defaultComputePool"] == "default" and ws["defaultAuxPool"] == ""
    # as upstream, a new workspace is pinned for its creator
    assert (ws["numProjects"], ws["numExperiments"], ws["pinned"], ws["archived"]) == (
        0,
        0,
        True,
        False,
    )

    _refused(409, lambda: api.workspaces.create("team-a"), "name:", "already exists")
    _refused(400, lambda: api.workspaces.create("   "), "name:", "non-whitespace")
    _refused(400, lambda: api.workspaces.create("x" * 81), "name:", "at most 80")
    _refused(
        400,
        lambda: api.workspaces.create("bad-store", checkpoint_storage_config={"type": "shared_fs"}),
        "checkpointStorageConfig.host_path",
    )
    _refused(
        400,
        lambda: api.workspaces.create("bad-uid", agent_user_group={"agentUid": -1}),
        "agentUserGroup.agentUid",
    )
    _refused(
        400,
        lambda: api.workspaces.create("bad-pool", default_aux_pool="nope"),
        "defaultAuxPool",
        "nope",
    )
    _refused(400, lambda: api.session.request("POST", "/api/v1/workspaces", body={}), "name:")

    listed = api.workspaces.list({"name": "TEAM-a"})["workspaces"]
    assert [w["id"] for w in listed] == [ws["id"]]
    assert api.workspaces.list({"nameCaseSensitive": "team-a"})["workspaces"] == []
    assert [w["id"] for w in api.workspaces.list({"name": "%M-%"})["workspaces"]] == [ws["id"]]
    by_name = api.workspaces.list({"sortBy": "SORT_BY_NAME", "orderBy": "ORDER_BY_DESC"})
    assert [w["name"] for w in by_name["workspaces"]] == ["Uncategorized", "Team-A"]
    assert by_name["pagination"]["total"] == 2
    page = api.workspaces.list({"limit": 1, "offset": 1})
    assert [w["id"] for w in page["workspaces"]] == [ws["id"]]
    assert page["pagination"]["endIndex"] == 2

    nulls = {"name": None, "agentUserGroup": None, "checkpointStorageConfig": None}
    nulls |= {"defaultComputeResourcePool": None, "defaultAuxResourcePool": None}
    same = api.session.request("PATCH", f"/api/v1/workspaces/{ws['id']}", body=nulls)
    assert same["workspace"] == api.workspaces.get(ws["id"])["workspace"]
    assert same["workspace"]["agentUserGroup"]["agentUid"] == 1000  # null: left as it is
    patched = api.workspaces.patch(
        ws["id"], name="team-b", checkpoint_storage_config={}, default_compute_pool=""
    )["workspace"]
    assert patched["name"] == "team-b" and patched["checkpointStorageConfig"] is None
    assert patched["defaultComputePool"] == "" and patched["agentUserGroup"]["agentUid"] == 1000
    _refused(409, lambda: api.workspaces.patch(ws["id"], name="UNCATEGORIZED"), "workspace.name")
    _refused(
        400,
        lambda: api.workspaces.patch(ws["id"], default_compute_pool="nope"),
        "workspace.defaultComputeResourcePool",
    )
    for action in (
        lambda: api.workspaces.patch(1, name="renamed"),
        lambda: api.workspaces.archive(1),
        lambda: api.workspaces.delete(1),
    ):
        _refused(400, action, "default workspace")

    api.workspaces.pin(ws["id"])
    api.workspaces.pin(ws["id"])
    pinned = api.workspaces.list({"pinned": "true"})["workspaces"]
    assert [w["id"] for w in pinned] == [ws["id"]] and pinned[0]["pinnedAt"]
    other = Client(master.session("determined"))
    api.workspaces.archive(ws["id"])
    assert api.workspaces.get(ws["id"])["workspace"]["archived"] is True
    assert [w["id"] for w in api.workspaces.list({"archived": "false"})["workspaces"]] == [1]
    _refused(400, lambda: api.projects.create(ws["id"], "in-archived"), "archived")
    api.workspaces.unarchive(ws["id"])
    api.workspaces.unpin(ws["id"])
    assert api.workspaces.get(ws["id"])["workspace"]["pinned"] is False

    project = api.projects.create(ws["id"], "p1")["project"]
    projects = api.workspaces.projects(ws["id"])
    assert [p["id"] for p in projects["projects"]] == [project["id"]]
    assert api.workspaces.get(ws["id"])["workspace"]["numProjects"] == 1
    assert api.workspaces.resource_pools(ws["id"])["resourcePools"] == ["default"]
    assert api.workspaces.delete(ws["id"]) == {"completed": True}
    _refused(404, lambda: api.workspaces.get(ws["id"]), "workspace", "not found")
    _refused(404, lambda: api.projects.get(project["id"]), "not found")
    _refused(404, lambda: api.workspaces.delete(12345), "not found")
    assert other.workspaces.get(1)["workspace"]["pinned"] is False


def test_delete_takes_projects_experiments_templates_and_refuses_models(
    admin: Client, context: pathlib.Path
) -> None:
    """Deleting a workspace deletes its projects with their finished experiments and its
    templates; an unfinished experiment or a model in it refuses the delete, nothing removed."""
    ws = admin.workspaces.create(_unique("doomed"))["workspace"]
    project = admin.projects.create(ws["id"], "p")["project"]
    created = client.create_experiment(
        admin.session, _config(), context, activate=False, project_id=project["id"]
    )
    admin.templates.create(_unique("tpl"), {"description": "x"}, ws["id"])
    assert admin.workspaces.get(ws["id"])["workspace"]["numExperiments"] == 1
    _refused(400, lambda: admin.workspaces.delete(ws["id"]), "not finished", str(created.id))
    failed = admin.workspaces.get(ws["id"])["workspace"]
    assert (
        failed["state"] == "WORKSPACE_STATE_DELETE_FAILED"
        and "not finished" in failed["errorMessage"]
    )
    admin.experiments.act(created.id, "kill")
    deadline = time.monotonic() + 60
    while admin.experiments.get(created.id)["experiment"]["state"] != "STATE_CANCELED":
        assert time.monotonic() < deadline
        time.sleep(0.1)
    model = admin.models.create({"name": _unique("m"), "workspaceId": ws["id"]})["model"]
    _refused(400, lambda: admin.workspaces.delete(ws["id"]), "contains models")
    admin.models.delete(model["name"])
    assert admin.workspaces.delete(ws["id"]) == {"completed": True}
    with pytest.raises(NotFoundError):
        admin.experiments.get(created.id)
    names = [t["workspaceId"] for t in admin.templates.list()["templates"]]
    assert ws["id"] not in names


def test_workspace_checkpoint_storage_reaches_experiments(
    admin: Client, context: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    """An experiment in a workspace with checkpoint storage gets it when its own config has
    none; its own storage wins; the default workspace leaves the master's default. An experiment
    naming no pool gets the workspace's default aux pool (no slots) or compute pool (slots)."""
    host_path = str(tmp_path / "ws-storage")
    ws = admin.workspaces.create(
        _unique("stored"), checkpoint_storage_config={"type": "shared_fs", "host_path": host_path}
    )["workspace"]
    project = admin.projects.create(ws["id"], "p")["project"]

    def validated(config: dict[str, Any], project_id: int) -> dict[str, Any]:
        import yaml

        body = {"config": yaml.safe_dump(config), "validateOnly": True, "projectId": project_id}
        return dict(admin.session.request("POST", "/api/v1/experiments", body=body)["config"])

    storage = validated(_config(), project["id"])["checkpoint_storage"]
    assert (storage["type"], storage["host_path"]) == ("shared_fs", host_path)
    own = {"type": "shared_fs", "host_path": str(tmp_path / "own")}
    assert (
        validated(_config(checkpoint_storage=own), project["id"])["checkpoint_storage"]["host_path"]
        == own["host_path"]
    )
    assert validated(_config(), 1)["checkpoint_storage"].get("host_path") != host_path
    assert validated(_config(), project["id"])["resources"]["resource_pool"] == ""
    admin.workspaces.patch(ws["id"], default_aux_pool="default")
    assert validated(_config(), project["id"])["resources"]["resource_pool"] == "default"
    one_slot = _config(resources={"slots_per_trial": 1})
    assert validated(one_slot, project["id"])["resources"]["resource_pool"] == ""

    created = client.create_experiment(
        admin.session, _config(), context, activate=False, project_id=project["id"]
    )
    config = admin.experiments.get(created.id)["config"]
    assert config["checkpoint_storage"]["host_path"] == host_path


# ---- authorization ------------------------------------------------------------------------------


def test_workspace_permissions(module_master: Any, admin: Client) -> None:
    """A plain user cannot create workspaces nor see others'; a Viewer sees but cannot edit;
    a WorkspaceCreator creates one and administers it (as upstream's RBAC)."""
    viewer_id, viewer = _user(admin, module_master, _unique("viewer"))
    creator_id, creator = _user(admin, module_master, _unique("creator"))
    ws = admin.workspaces.create(_unique("private"))["workspace"]

    msg = _refused(
        403, lambda: viewer.workspaces.create("mine"), "PERMISSION_TYPE_CREATE_WORKSPACE"
    )
    assert "permission denied" in msg
    assert ws["id"] not in [w["id"] for w in viewer.workspaces.list()["workspaces"]]
    _refused(404, lambda: viewer.workspaces.get(ws["id"]), "not found")
    _refused(404, lambda: viewer.workspaces.projects(ws["id"]), "not found")
    hidden = admin.projects.create(ws["id"], "hidden")["project"]
    assert hidden["id"] in [p["id"] for p in admin.workspaces.projects(0)["projects"]]
    everywhere = [p["workspaceId"] for p in viewer.workspaces.projects(0)["projects"]]
    assert 1 in everywhere and ws["id"] not in everywhere

    admin.rbac.assign(4, user_id=viewer_id, workspace_id=ws["id"])  # Viewer
    assert viewer.workspaces.get(ws["id"])["workspace"]["name"] == ws["name"]
    assert [p["id"] for p in viewer.workspaces.projects(ws["id"])["projects"]] == [hidden["id"]]
    assert ws["id"] in [w["id"] for w in viewer.workspaces.list()["workspaces"]]
    _refused(403, lambda: viewer.workspaces.patch(ws["id"], name="x"), "UPDATE_WORKSPACE")
    _refused(403, lambda: viewer.workspaces.archive(ws["id"]), "UPDATE_WORKSPACE")
    _refused(403, lambda: viewer.workspaces.delete(ws["id"]), "DELETE_WORKSPACE")
    admin.workspaces.unpin(ws["id"])  # its creator's pin
    viewer.workspaces.pin(ws["id"])
    assert viewer.workspaces.get(ws["id"])["workspace"]["pinned"] is True
    assert admin.workspaces.get(ws["id"])["workspace"]["pinned"] is False
    assert admin.workspaces.get(ws["id"])["workspace"]["name"] == ws["name"]

    admin.rbac.assign(3, user_id=creator_id)  # WorkspaceCreator, cluster-wide
    own = creator.workspaces.create(_unique("own"))["workspace"]
    _refused(
        403,
        lambda: creator.workspaces.create(_unique("x"), agent_user_group={"agentUid": 1}),
        "SET_WORKSPACE_AGENT_USER_GROUP",
    )
    renamed = creator.workspaces.patch(own["id"], name=own["name"] + "-r")["workspace"]
    assert renamed["username"] == creator.session.request("GET", "/api/v1/me")["user"]["username"]
    creator.projects.create(own["id"], "mine")
    _refused(404, lambda: creator.workspaces.get(ws["id"]), "not found")
    assert creator.workspaces.delete(own["id"]) == {"completed": True}


# ---- det ----------------------------------------------------------------------------------------


@pytest.fixture
def det(
    module_master: Any,
    tmp_path: pathlib.Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> Any:
    """``det`` in-process against the module's master, logged in as admin."""
    from cli.harness import Det

    for name in ("DET_USER_TOKEN", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DET_MASTER", module_master.url)
    monkeypatch.setenv("DET_CONFIG_DIR", str(tmp_path / "det-config"))
    monkeypatch.setenv("DET_USER", "admin")
    monkeypatch.setenv("DET_PASS", "")
    return Det(module_master.url, tmp_path / "det-config", capsys)


def test_det_workspace_commands(det: Any, admin: Client, tmp_path: pathlib.Path) -> None:
    """Upstream's ``det workspace`` tree with its flags, and clear errors."""
    name = _unique("cli-ws")
    out = det.ok(
        "w", "create", name, "--agent-uid", "1001", "--agent-user", "runner",
        "--checkpoint-storage-config", json.dumps({"type": "shared_fs", "host_path": "/tmp/a"}),
        "--default-compute-pool", "default",
    )  # fmt: skip
    assert name in out and "Agent Uid" in out and "1001" in out and "/tmp/a" in out
    made = json.loads(det.ok("workspace", "describe", name, "--json"))
    assert made["agentUserGroup"] == {"agentUid": 1001, "agentUser": "runner"}
    assert made["defaultComputePool"] == "default"

    listed = det.ok("w", "ls", "--sort-by", "name", "--order-by", "desc")
    assert name in listed and "Uncategorized" in listed and "# Projects" in listed
    first, second = "Uncategorized", name  # by letters regardless of case: u after c
    assert listed.index(first) < listed.index(second)
    as_json = json.loads(det.ok("w", "list", "--json"))
    assert name in [w["name"] for w in as_json]

    storage_file = tmp_path / "storage.yaml"
    storage_file.write_text("type: shared_fs\nhost_path: /tmp/b\n")
    edited = json.loads(
        det.ok(
            "w",
            "edit",
            name,
            "--name",
            name + "-e",
            "--checkpoint-storage-config-file",
            str(storage_file),
            "--agent-gid",
            "7",
            "--json",
        )
    )
    assert (
        edited["name"] == name + "-e" and edited["checkpointStorageConfig"]["host_path"] == "/tmp/b"
    )
    assert edited["agentUserGroup"] == {"agentGid": 7}
    name += "-e"
    cleared = json.loads(det.ok("w", "edit", name, "--checkpoint-storage-config", "{}", "--json"))
    assert cleared["checkpointStorageConfig"] is None

    admin.projects.create(int(made["id"]), "cli-proj", description="d")
    projects = det.ok("w", "list-projects", name)
    assert "cli-proj" in projects and "# Active Experiments" in projects
    assert json.loads(det.ok("w", "list-projects", name, "--json"))[0]["name"] == "cli-proj"
    assert "default" in det.ok("w", "list-pools", name)

    assert "archived" in det.ok("w", "archive", name)
    assert admin.workspaces.get(int(made["id"]))["workspace"]["archived"] is True
    assert "un-archived" in det.ok("w", "unarchive", name)

    code, out, err = det.run("w", "create", name.upper())
    assert code != 0 and "already exists" in out + err
    code, out, err = det.run("w", "describe", "no-such-workspace")
    assert code != 0 and 'workspace "no-such-workspace" not found' in out + err
    code, out, err = det.run("w", "create", "x", "--checkpoint-storage-config", "{nope")
    assert code != 0 and "--checkpoint-storage-config: invalid JSON" in out + err
    code, out, err = det.run("w", "delete", "Uncategorized", "--yes")
    assert code != 0 and "default workspace" in out + err

    viewer = admin.users.create({"username": _unique("member"), "active": True}, "")["user"]
    admin.rbac.assign(4, user_id=viewer["id"], workspace_id=int(made["id"]))  # Viewer
    members = det.ok("w", "list-members", name)
    assert viewer["username"] in members and "Viewer" in members and "User/Group" in members
    as_csv = det.ok("w", "list-members", name, "--csv").splitlines()
    assert as_csv[0] == "User/Group Name,User/Group,Role Name"
    assert f"{viewer['username']},U,Viewer" in as_csv
    members_json = json.loads(det.ok("w", "list-members", name, "--json"))
    assert [u["username"] for u in members_json["usersAssignedDirectly"]] == [viewer["username"]]

    assert "Successfully deleted" in det.ok("w", "delete", name, "--yes")
    assert admin.workspaces.by_name(name) is None


# ---- SDK ----------------------------------------------------------------------------------------


def test_sdk_workspace(module_master: Any, admin: Client, context: pathlib.Path) -> None:
    """``Determined.create/get/list/delete_workspace`` and ``Workspace``'s methods."""
    from determined.experimental import Determined, Project, Workspace

    d = Determined(module_master.url, user="admin", password="")
    name = _unique("sdk-ws")
    ws = d.create_workspace(name)
    assert isinstance(ws, Workspace) and ws.name == name and ws.id > 1
    _refused(409, lambda: d.create_workspace(name.upper()), "already exists")
    assert d.get_workspace(name).id == ws.id
    assert name in [w.name for w in d.list_workspaces()]
    with pytest.raises(NotFoundError):
        d.get_workspace("no-such-ws")
    with pytest.raises(ValueError):
        Workspace(d._session)
    by_id = Workspace(d._session, workspace_id=ws.id)
    by_id.reload()
    assert (by_id.name, by_id.num_projects) == (name, 0)

    project = ws.create_project("sdk-proj", description="via sdk")
    assert isinstance(project, Project) and project.workspace_id == ws.id
    assert [p.name for p in ws.list_projects()] == ["sdk-proj"]
    assert ws.get_project("sdk-proj").id == project.id
    with pytest.raises(NotFoundError):
        ws.get_project("nope")
    assert [p.name for p in ws.list_pools()] == ["default"]

    ws.set_checkpoint_storage({"type": "shared_fs", "host_path": "/tmp/sdk"})
    ws.set_agent_user_group(agent_uid=5, agent_user="five")
    ws.reload()
    assert ws.checkpoint_storage_config == {"type": "shared_fs", "host_path": "/tmp/sdk"}
    assert ws.agent_user_group == {"agentUid": 5, "agentUser": "five"}
    ws.pin()
    ws.archive()
    ws.reload()
    assert ws.pinned and ws.archived
    ws.unarchive()
    ws.set_name(name + "-r")
    assert d.get_workspace(name + "-r").id == ws.id

    ws.delete_project("sdk-proj")
    assert ws.list_projects() == []
    d.delete_workspace(name + "-r")
    with pytest.raises(NotFoundError):
        d.get_workspace(name + "-r")


# ---- upstream's own CLI ---------------------------------------------------------------------------


@pytest.mark.e2e
@pytest.mark.slow
def test_upstream_det_workspace_settings(module_master: Any, tmp_path: pathlib.Path) -> None:
    """Upstream's ``det workspace`` (determined==0.38.1) sets, shows, keeps and clears a
    workspace's settings: its PATCH sends every unset field as null, which must change nothing."""
    from e2e.test_upstream_client import _upstream_python
    from teams.test_upstream_teams import UpstreamDet

    det = UpstreamDet(_upstream_python(), tmp_path, module_master.url)
    name = _unique("up-ws")
    storage = json.dumps({"type": "shared_fs", "host_path": "/tmp/up"})
    det("w", "create", name, "--agent-uid", "5", "--agent-user", "u",
        "--checkpoint-storage-config", storage, "--default-compute-pool", "default")  # fmt: skip
    det("w", "edit", name, "--name", name + "-e", "--default-aux-pool", "default")
    shown = json.loads(det("w", "describe", name + "-e", "--json"))
    assert (shown["agentUserGroup"]["agentUid"], shown["agentUserGroup"]["agentUser"]) == (5, "u")
    assert shown["checkpointStorageConfig"] == {"type": "shared_fs", "host_path": "/tmp/up"}
    assert (shown["defaultComputePool"], shown["defaultAuxPool"]) == ("default", "default")
    det("w", "edit", name + "-e", "--checkpoint-storage-config", "{}")
    assert (
        json.loads(det("w", "describe", name + "-e", "--json"))["checkpointStorageConfig"] is None
    )
    assert name + "-e" in det("w", "list")
    det("w", "archive", name + "-e")
    det("w", "unarchive", name + "-e")
    assert "Successfully deleted" in det("w", "delete", name + "-e", "--yes")
