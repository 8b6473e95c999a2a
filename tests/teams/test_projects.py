"""Projects through the REST API (upstream's routes and JSON shapes), ``det project``/``det e move``,
and the SDK's ``Project`` and ``Experiment.move_to_project``.

Experiments here are created paused (never scheduled) unless a test needs one to finish, so the
module's one master stays cheap; each test names its own projects.
"""

from __future__ import annotations

import itertools
import pathlib
from typing import Any

import pytest

from determined import client
from determined.client import APIError, Client, NotFoundError

TRAIN = "print('hello')\n"
_names = itertools.count()


def _config(**overrides: Any) -> dict[str, Any]:
    config: dict[str, Any] = {
        "name": "projects-test",
        "entrypoint": "python3 train.py",
        "searcher": {"name": "single", "metric": "loss", "max_length": {"batches": 1}},
        "hyperparameters": {"lr": 0.1, "layers": {"type": "int", "minval": 1, "maxval": 4}},
        "max_restarts": 0,
        "resources": {"slots_per_trial": 1},
    }
    config.update(overrides)
    return config


@pytest.fixture(scope="module")
def context(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    path = tmp_path_factory.mktemp("context")
    (path / "train.py").write_text(TRAIN)
    return path


@pytest.fixture(scope="module")
def admin(module_master: Any) -> Client:
    return Client(module_master.session("admin"))


def _unique(prefix: str) -> str:
    return f"{prefix}-{next(_names)}"


HOME = "projects-home"
"""The workspace the tests' projects go to (the default workspace takes none, as upstream's)."""


def _home_id(api: Client) -> int:
    found = api.workspaces.list({"nameCaseSensitive": HOME})["workspaces"]
    return int(found[0]["id"]) if found else int(api.workspaces.create(HOME)["workspace"]["id"])


def _project(api: Client, workspace_id: int | None = None, **kwargs: Any) -> dict[str, Any]:
    workspace_id = _home_id(api) if workspace_id is None else workspace_id
    return dict(api.projects.create(workspace_id, _unique("proj"), **kwargs)["project"])


def _experiment(api: Client, context: pathlib.Path, **kwargs: Any) -> dict[str, Any]:
    config = kwargs.pop("config", None) or _config()
    created = client.create_experiment(api.session, config, context, activate=False, **kwargs)
    return dict(api.experiments.get(created.id)["experiment"])


def _refused(status: int, call: Any, *fields: str) -> str:
    with pytest.raises(APIError) as info:
        call()
    assert info.value.status == status, str(info.value)
    for field in fields:
        assert field in str(info.value), str(info.value)
    return str(info.value)


# ---- REST -----------------------------------------------------------------------------------------


def test_project_crud_and_validation(master: Any) -> None:
    """On SQLite and PostgreSQL: create, get, patch and delete, in upstream's shapes; bad input
    answers 4xx naming the field; the default project is immutable."""
    api = Client(master.session("admin"))
    default = api.projects.get(1)["project"]
    assert (default["name"], default["workspaceName"], default["immutable"]) == (
        "Uncategorized",
        "Uncategorized",
        True,
    )
    home = int(api.workspaces.create("crud-home")["workspace"]["id"])
    _refused(400, lambda: api.projects.create(1, "x"), "workspaceId", "default workspace")
    made = api.projects.create(home, "alpha", description="first", key="alp")["project"]
    for field in (
        "id",
        "name",
        "key",
        "workspaceId",
        "workspaceName",
        "notes",
        "numExperiments",
        "numActiveExperiments",
        "archived",
        "username",
        "userId",
        "immutable",
        "state",
        "errorMessage",
        "description",
    ):
        assert field in made, field
    assert (made["name"], made["key"], made["description"], made["username"]) == (
        "alpha",
        "ALP",
        "first",
        "admin",
    )
    assert (made["numExperiments"], made["immutable"], made["notes"]) == (0, False, [])
    generated = api.projects.create(home, "beta gamma")["project"]
    assert len(generated["key"]) == 5 and generated["key"].startswith("BET")
    assert api.projects.get_by_key("alp")["project"]["id"] == made["id"]

    _refused(409, lambda: api.projects.create(home, "alpha"), "name", "already exists")
    _refused(409, lambda: api.projects.create(home, "delta", key="ALP"), "key", "in use")
    _refused(400, lambda: api.projects.create(home, "delta", key="toolong"), "key", "5 characters")
    _refused(400, lambda: api.projects.create(home, "delta", key="a-b"), "key", "alphanumeric")
    _refused(400, lambda: api.projects.create(home, "  "), "name")
    _refused(404, lambda: api.projects.create(999, "delta"), "workspace 999")
    _refused(
        400,
        lambda: api.session.request("POST", "/api/v1/workspaces/1/projects", body={}),
        "name: required",
    )
    _refused(404, lambda: api.projects.get(9999), "project 9999 not found")

    # Upstream's PATCH body is the PatchProject itself (protobuf wrappers accepted too).
    patched = api.session.request(
        "PATCH", f"/api/v1/projects/{made['id']}", body={"name": "alpha2", "description": "new"}
    )["project"]
    assert (patched["name"], patched["description"], patched["key"]) == ("alpha2", "new", "ALP")
    assert api.projects.patch(made["id"], key="zz9")["project"]["key"] == "ZZ9"
    _refused(409, lambda: api.projects.patch(made["id"], name="beta gamma"), "project.name")
    _refused(400, lambda: api.projects.patch(made["id"], key=""), "project.key")
    _refused(400, lambda: api.projects.patch(1, name="renamed"), "default project")

    for call in (api.projects.delete, api.projects.archive):
        _refused(400, lambda c=call: c(1), "default project")
    assert api.projects.delete(made["id"]) == {"completed": True}
    _refused(404, lambda: api.projects.get(made["id"]), "not found")
    assert api.projects.get(1)["project"]["immutable"] is True


def test_notes(admin: Client) -> None:
    """POST adds one note (upstream's body is the note), PUT replaces them all."""
    project = _project(admin)
    pid = project["id"]
    body = {"name": "readme", "contents": "# hello"}
    notes = admin.session.request("POST", f"/api/v1/projects/{pid}/notes", body=body)["notes"]
    assert notes == [body]
    notes = admin.projects.add_note(pid, "todo", "- more")["notes"]
    assert [n["name"] for n in notes] == ["readme", "todo"]
    replaced = admin.projects.put_notes(pid, [{"name": "only", "contents": "x"}])["notes"]
    assert replaced == [{"name": "only", "contents": "x"}]
    assert admin.projects.get(pid)["project"]["notes"] == replaced
    _refused(400, lambda: admin.projects.put_notes(pid, [{"contents": "x"}]), "notes[0].name")
    _refused(
        400,
        lambda: admin.session.request("PUT", f"/api/v1/projects/{pid}/notes", body={}),
        "notes: required",
    )
    _refused(404, lambda: admin.projects.add_note(9999, "a", "b"), "project 9999")
    assert admin.projects.get(pid)["project"]["notes"] == replaced


def test_experiments_belong_to_projects(admin: Client, context: pathlib.Path) -> None:
    """``projectId`` and the config's ``workspace``/``project`` place an experiment; experiments
    list by project; the experiment's wire shape names its project and workspace."""
    project = _project(admin)
    pid = project["id"]
    exp = _experiment(admin, context, project_id=pid)
    assert (exp["projectId"], exp["projectName"]) == (pid, project["name"])
    assert (exp["workspaceId"], exp["workspaceName"]) == (_home_id(admin), HOME)
    by_names = _experiment(admin, context, config=_config(workspace=HOME, project=project["name"]))
    assert by_names["projectId"] == pid
    default = _experiment(admin, context)
    assert (default["projectId"], default["projectName"]) == (1, "Uncategorized")

    listed = admin.experiments.list({"projectId": pid})["experiments"]
    assert sorted(e["id"] for e in listed) == sorted([exp["id"], by_names["id"]])
    counted = admin.projects.get(pid)["project"]
    assert counted["numExperiments"] == 2 and counted["lastExperimentStartedAt"]

    _refused(404, lambda: _experiment(admin, context, project_id=9999), "project 9999")
    _refused(
        404,
        lambda: _experiment(admin, context, config=_config(workspace=HOME, project="no")),
        "project 'no' not found",
    )
    _refused(
        400,
        lambda: _experiment(admin, context, config=_config(project=project["name"])),
        "workspace",
    )


def test_columns(admin: Client, context: pathlib.Path) -> None:
    """The columns upstream's CLI and web UI ask for: fixed ones, then the hyperparameters."""
    project = _project(admin)
    _experiment(admin, context, project_id=project["id"])
    columns = admin.projects.columns(project["id"])["columns"]
    names = [c["column"] for c in columns]
    assert names[:3] == ["id", "name", "description"]
    assert {"state", "searcherType", "user", "numTrials"} <= set(names)
    hps = {c["column"]: c for c in columns if c["location"] == "LOCATION_TYPE_HYPERPARAMETERS"}
    assert set(hps) == {"hp.lr", "hp.layers"}
    assert hps["hp.layers"]["type"] == "COLUMN_TYPE_NUMBER"
    _refused(404, lambda: admin.projects.columns(9999), "project 9999")


def test_metric_columns_and_registered_checkpoints(admin: Client, tmp_path: pathlib.Path) -> None:
    """Once a trial reported, its metrics' summary statistics are columns too (``training.*.last``,
    ``validation.*.min``, ...); a project whose checkpoint is a model version is not deleted
    (nothing is)."""
    from cli.harness import TRIAL

    (tmp_path / "train.py").write_text(TRIAL)
    project = _project(admin)
    config = _config(hyperparameters={"steps": 3}, searcher={"name": "single", "metric": "loss"})
    created = client.create_experiment(admin.session, config, tmp_path, project_id=project["id"])
    assert _wait_terminal(admin, int(created.id)) == "STATE_COMPLETED"
    columns = {c["column"]: c for c in admin.projects.columns(project["id"])["columns"]}
    assert columns["training.loss.last"]["location"] == "LOCATION_TYPE_TRAINING"
    assert columns["validation.validation_loss.min"]["location"] == "LOCATION_TYPE_VALIDATIONS"
    assert columns["hp.steps"]["type"] == "COLUMN_TYPE_NUMBER"
    counts = admin.projects.get(project["id"])["project"]
    assert (counts["numExperiments"], counts["numActiveExperiments"], counts["numRuns"]) == (
        1,
        0,
        1,
    )

    checkpoints = admin.experiments.checkpoints(int(created.id))["checkpoints"]
    ckpt = max(
        checkpoints, key=lambda c: c["reportTime"]
    )  # the latest: garbage collection keeps it
    model = _unique("model")
    admin.models.create({"name": model})
    admin.models.create_version(model, {"checkpointUuid": ckpt["uuid"]})
    _refused(400, lambda: admin.projects.delete(project["id"]), "model registry", model)
    assert admin.experiments.get(int(created.id))["experiment"]["state"] == "STATE_COMPLETED"
    admin.models.delete(model)
    assert admin.projects.delete(project["id"]) == {"completed": True}


def test_move_experiments_and_archived_projects(admin: Client, context: pathlib.Path) -> None:
    """Upstream's MoveExperiment and bulk move; an archived project takes no experiment (neither
    created nor moved in) and lets none leave."""
    source, target = _project(admin), _project(admin)
    first = _experiment(admin, context, project_id=source["id"])
    second = _experiment(admin, context, project_id=source["id"])
    body = {"experimentId": first["id"], "destinationProjectId": target["id"]}
    assert admin.session.request("POST", f"/api/v1/experiments/{first['id']}/move", body=body) == {}
    moved = admin.experiments.get(first["id"])["experiment"]
    assert (moved["projectId"], moved["projectName"]) == (target["id"], target["name"])

    results = admin.projects.move_experiments(source["id"], [second["id"], first["id"]], 1)
    by_id = {r["id"]: r["error"] for r in results["results"]}
    assert by_id[second["id"]] == ""
    assert f"not in project {source['id']}" in by_id[first["id"]]
    assert admin.experiments.get(second["id"])["experiment"]["projectId"] == 1
    _refused(404, lambda: admin.projects.move_experiment(first["id"], 9999), "project 9999")
    _refused(404, lambda: admin.projects.move_experiment(999999, source["id"]), "999999")
    _refused(
        400,
        lambda: admin.session.request("POST", f"/api/v1/experiments/{first['id']}/move", body={}),
        "destinationProjectId: required",
    )

    admin.projects.archive(target["id"])
    assert admin.projects.get(target["id"])["project"]["archived"] is True
    _refused(
        400,
        lambda: admin.projects.move_experiment(second["id"], target["id"]),
        "is archived and cannot add new experiments",
    )
    _refused(
        400,
        lambda: admin.projects.move_experiment(first["id"], source["id"]),
        "cannot have experiments moved from it",
    )
    _refused(400, lambda: _experiment(admin, context, project_id=target["id"]), "archived")
    _refused(400, lambda: admin.projects.patch(target["id"], name="x"), "archived")
    assert admin.experiments.get(second["id"])["experiment"]["projectId"] == 1
    admin.projects.unarchive(target["id"])
    admin.projects.move_experiment(second["id"], target["id"])
    assert admin.projects.get(target["id"])["project"]["numExperiments"] == 2


def test_delete_project_with_experiments(admin: Client, context: pathlib.Path) -> None:
    """A project with an unfinished experiment stays; once its experiments ended, deleting the
    project deletes them too."""
    project = _project(admin)
    exp = _experiment(admin, context, project_id=project["id"])
    _refused(400, lambda: admin.projects.delete(project["id"]), "not finished", str(exp["id"]))
    assert admin.projects.get(project["id"])["project"]["numExperiments"] == 1
    admin.experiments.act(exp["id"], "kill")
    _wait_terminal(admin, exp["id"])
    assert admin.projects.delete(project["id"]) == {"completed": True}
    _refused(404, lambda: admin.projects.get(project["id"]), "not found")
    with pytest.raises(NotFoundError):
        admin.experiments.get(exp["id"])


def _wait_terminal(api: Client, exp_id: int, timeout: float = 60) -> str:
    import time

    deadline = time.monotonic() + timeout
    while True:
        state = str(api.experiments.get(exp_id)["experiment"]["state"])
        if state in ("STATE_CANCELED", "STATE_COMPLETED", "STATE_ERROR"):
            return state
        assert time.monotonic() < deadline, f"experiment {exp_id} still {state}"
        time.sleep(0.1)


# ---- det ------------------------------------------------------------------------------------------


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


def test_det_project_commands(
    det: Any, admin: Client, context: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    """Upstream's ``det project`` tree, ``det e create --project_id`` and ``det e move``."""
    import json

    import yaml

    name, other = _unique("cli"), _unique("cli-other")
    _home_id(admin)
    out = det.ok("p", "create", HOME, name, "--description", "from det", "--key", "cli7")
    assert "CLI7" in out and name in out and "# Active Experiments" in out
    made = json.loads(det.ok("project", "create", HOME, other, "--json"))
    assert made["name"] == other and made["workspaceName"] == HOME
    listed = det.ok("p", "ls", HOME, "--sort-by", "name", "--order-by", "desc")
    assert name in listed and other in listed and listed.index(other) < listed.index(name)
    described = json.loads(det.ok("p", "describe", HOME, name, "--json"))
    assert (described["key"], described["description"]) == ("CLI7", "from det")

    config = tmp_path / "exp.yaml"
    config.write_text(yaml.safe_dump(_config()))
    det.ok(
        "e", "create", str(config), str(context), "--project_id", str(described["id"]), "--paused"
    )
    (exp,) = admin.experiments.list({"projectId": described["id"]})["experiments"]
    moved = det.ok("e", "move", str(exp["id"]), HOME, other)
    assert moved.strip() == f'Moved experiment {exp["id"]} to project "{other}"'
    assert admin.experiments.get(exp["id"])["experiment"]["projectId"] == made["id"]
    rows = det.ok("p", "list-experiments", HOME, other)
    assert str(exp["id"]) in rows and "Resource Pool" in rows
    assert json.loads(det.ok("p", "list-experiments", HOME, name, "--json")) == []
    assert "Associated Experiments" in det.ok("p", "describe", HOME, other, "-a")

    det.ok("p", "edit", HOME, name, "--new_name", f"{name}-2", "--description", "x")
    renamed = admin.projects.get(described["id"])["project"]
    assert (renamed["name"], renamed["description"]) == (f"{name}-2", "x")
    assert "Successfully archived" in det.ok("p", "archive", HOME, f"{name}-2")
    assert admin.projects.get(described["id"])["project"]["archived"] is True
    assert "un-archived" in det.ok("p", "unarchive", HOME, f"{name}-2")
    assert "Successfully deleted" in det.ok("p", "delete", HOME, f"{name}-2", "--yes")
    with pytest.raises(NotFoundError):
        admin.projects.get(described["id"])

    code, _, err = det.run("p", "describe", HOME, "no-such-project")
    assert code == 1 and "no-such-project" in err and "not found" in err
    code, _, err = det.run("p", "create", HOME, _unique("cli"), "--key", "toolong")
    assert code == 1 and "key" in err and "Traceback" not in err
    code, _, err = det.run("e", "move", str(exp["id"]), "No Such Workspace", other)
    assert code == 1 and "No Such Workspace" in err
    code, _, err = det.run("p", "delete", "Uncategorized", "Uncategorized", "--yes")
    assert code == 1 and "default project" in err


# ---- SDK ------------------------------------------------------------------------------------------


def test_sdk_project(module_master: Any, admin: Client, context: pathlib.Path) -> None:
    """Upstream's ``Project`` methods and ``Experiment.move_to_project``."""
    from determined.experimental import Determined, Project

    sdk = Determined(module_master.url, "admin", "")
    first, second = _project(admin), _project(admin)
    project = Project(admin.session, first["id"])
    project.reload()
    assert (project.name, project.key, project.workspace_id) == (
        first["name"],
        first["key"],
        _home_id(admin),
    )
    assert (project.n_experiments, project.archived, project.notes) == (0, False, [])
    project.set_name(project.name + "-sdk")
    project.set_description("made by the SDK")
    project.set_key("sdk1")
    assert (project.key, project.description) == ("SDK1", "made by the SDK")
    project.add_note("one", "1")
    project.add_note("two", "2")
    project.add_note("two", "again")
    project.remove_note("one")
    assert [n["name"] for n in project.notes or []] == ["two", "two"]
    with pytest.raises(ValueError, match="Multiple notes"):
        project.remove_note("two")
    with pytest.raises(ValueError, match="No note"):
        project.remove_note("one")

    exp = sdk.create_experiment(_config(), context, project_id=project.id, activate=False)
    assert (exp.project_id, exp.workspace_id) == (project.id, _home_id(admin))
    assert [e.id for e in project.list_experiments()] == [exp.id]
    exp.move_to_project(HOME, second["name"])
    assert exp.project_id == second["id"]
    exp.reload()
    assert exp.project_id == second["id"]
    assert [e.id for e in sdk.list_experiments(project_id=second["id"])] == [exp.id]
    with pytest.raises(NotFoundError):
        exp.move_to_project(HOME, "no-such-project")
    project.archive()
    with pytest.raises(APIError, match="archived"):
        exp.move_to_project(HOME, project.name or "")
    project.unarchive()
    project.reload()
    assert project.archived is False and project.n_experiments == 0


def test_move_project_between_workspaces(admin: Client, context: pathlib.Path) -> None:
    """Upstream's MoveProject: the project and its experiments change workspace; a name taken
    there, an archived project or workspace, and the default project are refused."""
    target = admin.workspaces.create(_unique("ws"))["workspace"]
    project = _project(admin)
    exp = _experiment(admin, context, project_id=project["id"])
    body = {"projectId": project["id"], "destinationWorkspaceId": target["id"]}
    assert admin.session.request("POST", f"/api/v1/projects/{project['id']}/move", body=body) == {}
    moved = admin.projects.get(project["id"])["project"]
    assert (moved["workspaceId"], moved["workspaceName"]) == (target["id"], target["name"])
    wire = admin.experiments.get(exp["id"])["experiment"]
    assert (wire["workspaceId"], wire["workspaceName"]) == (target["id"], target["name"])
    in_target = admin.workspaces.projects(target["id"])["projects"]
    assert [p["name"] for p in in_target] == [project["name"]]

    home = _home_id(admin)
    twin = admin.projects.create(home, project["name"])["project"]
    _refused(409, lambda: admin.projects.move(twin["id"], target["id"]), "destinationWorkspaceId")
    _refused(404, lambda: admin.projects.move(twin["id"], 9999), "workspace 9999")
    _refused(400, lambda: admin.projects.move(1, target["id"]), "default project")
    _refused(
        400,
        lambda: admin.session.request("POST", f"/api/v1/projects/{twin['id']}/move", body={}),
        "destinationWorkspaceId: required",
    )
    admin.projects.archive(twin["id"])
    _refused(400, lambda: admin.projects.move(twin["id"], target["id"]), "archived")
    admin.projects.unarchive(twin["id"])

    admin.workspaces.archive(target["id"])
    _refused(400, lambda: admin.projects.create(target["id"], "late"), "workspaceId", "archived")
    _refused(400, lambda: admin.projects.archive(project["id"]), "archived workspace")
    _refused(400, lambda: admin.projects.move(project["id"], 1), "archived workspace")
    _refused(400, lambda: _experiment(admin, context, project_id=project["id"]), "archived")
    admin.workspaces.unarchive(target["id"])
    _refused(400, lambda: admin.projects.move(project["id"], 1), "default workspace")
    _refused(409, lambda: admin.projects.move(project["id"], home), "already exists")
    admin.projects.delete(twin["id"])
    admin.projects.move(project["id"], home)
    assert admin.projects.get(project["id"])["project"]["workspaceId"] == home


def test_project_permissions(module_master: Any, admin: Client, context: pathlib.Path) -> None:
    """A user outside a workspace sees none of its projects (404); a Viewer sees them but is
    refused every change (403 naming the permission, nothing changed); an Editor works in them."""
    viewer_role, editor_role = 4, 5
    ws = admin.workspaces.create(_unique("ws"))["workspace"]
    project = admin.projects.create(ws["id"], _unique("proj"), description="as it was")["project"]
    users = {}
    for role in ("outsider", "viewer", "editor"):
        name = _unique(role)
        user = admin.users.create({"username": name, "active": True}, client.hash_password(""))
        users[role] = (user["user"], Client(module_master.session(name)))
    admin.rbac.assign(viewer_role, user_id=users["viewer"][0]["id"], workspace_id=ws["id"])
    admin.rbac.assign(editor_role, user_id=users["editor"][0]["id"], workspace_id=ws["id"])
    pid = project["id"]

    outsider = users["outsider"][1]
    _refused(404, lambda: outsider.projects.get(pid), f"project {pid} not found")
    _refused(404, lambda: outsider.projects.patch(pid, name="x"), "not found")
    _refused(404, lambda: outsider.projects.create(ws["id"], "mine"), "not found")
    _refused(404, lambda: outsider.projects.columns(pid), "not found")
    own = _experiment(outsider, context)  # the default workspace is everyone's
    _refused(404, lambda: outsider.projects.move_experiment(own["id"], pid), "not found")

    viewer = users["viewer"][1]
    assert viewer.projects.get(pid)["project"]["name"] == project["name"]
    for call in (
        lambda: viewer.projects.patch(pid, description="changed"),
        lambda: viewer.projects.add_note(pid, "n", "c"),
        lambda: viewer.projects.archive(pid),
        lambda: viewer.projects.delete(pid),
        lambda: viewer.projects.create(ws["id"], "mine"),
    ):
        _refused(403, call, "PERMISSION_TYPE_")
    mine = _experiment(viewer, context)
    _refused(403, lambda: viewer.projects.move_experiment(mine["id"], pid), "CREATE_EXPERIMENT")
    unchanged = admin.projects.get(pid)["project"]
    assert (unchanged["description"], unchanged["notes"], unchanged["archived"]) == (
        "as it was",
        [],
        False,
    )
    assert admin.experiments.get(mine["id"])["experiment"]["projectId"] == 1

    editor = users["editor"][1]
    editor.projects.patch(pid, description="edited")
    made = editor.projects.create(ws["id"], _unique("proj"))["project"]
    exp = _experiment(editor, context)
    editor.projects.move_experiment(exp["id"], made["id"])
    assert admin.experiments.get(exp["id"])["experiment"]["workspaceId"] == ws["id"]
    _refused(404, lambda: outsider.experiments.get(exp["id"]), "not found")

    # Deleting: the creator or an admin, and a WorkspaceAdmin of the project's workspace.
    other_name, ws_admin_name = _unique("editor"), _unique("wsadmin")
    for name, role in ((other_name, editor_role), (ws_admin_name, 2)):
        user = admin.users.create({"username": name, "active": True}, client.hash_password(""))
        admin.rbac.assign(role, user_id=user["user"]["id"], workspace_id=ws["id"])
    other = Client(module_master.session(other_name))
    admin.experiments.act(exp["id"], "kill")
    _wait_terminal(admin, exp["id"])
    _refused(403, lambda: other.projects.delete(made["id"]), "owner or an admin")
    assert admin.projects.get(made["id"])["project"]["numExperiments"] == 1
    shared = editor.projects.create(ws["id"], _unique("shared"))["project"]
    theirs = _experiment(admin, context, project_id=shared["id"])
    admin.experiments.act(theirs["id"], "kill")
    _wait_terminal(admin, theirs["id"])
    _refused(403, lambda: editor.projects.delete(shared["id"]), "other users' experiments")
    assert admin.experiments.get(theirs["id"])["experiment"]["projectId"] == shared["id"]
    ws_admin = Client(module_master.session(ws_admin_name))
    assert ws_admin.projects.delete(made["id"]) == {"completed": True}
    with pytest.raises(NotFoundError):
        admin.experiments.get(exp["id"])


def test_unmanaged_experiments_go_to_their_project(admin: Client) -> None:
    """core_v2's ``workspace``/``project`` config (an unmanaged experiment) places it, as a managed
    one's does."""
    import yaml

    project = _project(admin)
    searcher = {"name": "single", "metric": "loss"}
    config = {"name": "in-project", "searcher": searcher, "workspace": HOME}
    config["project"] = project["name"]
    exp = admin.experiments.create_unmanaged(yaml.safe_dump(config))["experiment"]
    assert (exp["projectId"], exp["projectName"], exp["unmanaged"]) == (
        project["id"],
        project["name"],
        True,
    )
    by_id = admin.experiments.create_unmanaged(
        yaml.safe_dump({"name": "u", "searcher": searcher}), project_id=project["id"]
    )
    assert by_id["experiment"]["projectId"] == project["id"]
    config["project"] = "no-such-project"
    _refused(404, lambda: admin.experiments.create_unmanaged(yaml.safe_dump(config)), "not found")
