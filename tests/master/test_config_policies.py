"""Config policies (``/api/v1/config-policies/...``) against a real master: set, read and delete
global and workspace policies from YAML or JSON text, refusals naming the field, who may change
them, and their effect: an invariant config reaching a real trial process, constraints refusing
experiments and commands that ask for too much."""

from __future__ import annotations

import json
import pathlib
import time
from typing import Any

import pytest
import requests
import yaml
from master.conftest import TRIAL_SCRIPT, Client, exp_config, wait_for

from determined import client as det_client

POLICIES_YAML = """\
constraints:
  priority_limit: 10
  resources:
    max_slots: 2
invariant_config:
  description: set by the admins
  environment:
    environment_variables:
      - FORCED=by-policy
"""
NTSC_JSON = json.dumps({"constraints": {"priority_limit": 20, "resources": {"max_slots": 1}}})
ENV_TRIAL = "import os\nprint('FORCED=' + os.environ.get('FORCED', '<unset>'))\n" + TRIAL_SCRIPT


def _global(kind: str) -> str:
    return f"/api/v1/config-policies/global/{kind}"


def _workspace(ws: int, kind: str) -> str:
    return f"/api/v1/config-policies/workspaces/{ws}/{kind}"


def _put(api: Client, path: str, text: str) -> requests.Response:
    return api.request("PUT", path, json={"configPolicies": text})


def _refused(response: requests.Response, status: int, *fragments: str) -> str:
    assert response.status_code == status, response.text
    message = str(response.json()["error"]["error"])
    for fragment in fragments:
        assert fragment in message, message
    return message


@pytest.fixture(scope="module")
def basic_master(make_module_master: Any) -> Any:
    """Upstream's open-source master: basic authorization."""
    return make_module_master(security={"authz": {"type": "basic"}})


@pytest.fixture(scope="module")
def admin(basic_master: Any) -> Client:
    return Client(basic_master.url).login("admin")


def _new_workspace(api: Client, name: str) -> int:
    return int(api.post("/api/v1/workspaces", {"name": name})["workspace"]["id"])


def _project_in(api: Client, ws: int, name: str) -> int:
    body = {"name": name, "workspaceId": ws}
    return int(api.post(f"/api/v1/workspaces/{ws}/projects", body)["project"]["id"])


def _user(master: Any, admin: Client, name: str) -> Client:
    det_client.Client(master.session("admin")).users.create(
        {"username": name, "active": True}, det_client.hash_password("")
    )
    return Client(master.url).login(name)


def test_set_get_delete_global_and_workspace(basic_master: Any, admin: Client) -> None:
    master = basic_master
    ws = _new_workspace(admin, "cp-crud")
    assert _stored(master, ws) == 0
    saved = _put(admin, _workspace(ws, "EXPERIMENT"), POLICIES_YAML)
    assert saved.status_code == 200, saved.text
    expected = {
        "constraints": {"priority_limit": 10, "resources": {"max_slots": 2}},
        "invariant_config": {
            "description": "set by the admins",
            "environment": {"environment_variables": ["FORCED=by-policy"]},
        },
    }
    assert saved.json() == {"configPolicies": expected}
    assert admin.get(_workspace(ws, "EXPERIMENT")) == {"configPolicies": expected}
    # JSON text, the other workload type, the global scope: each kept apart.
    assert _put(admin, _global("NTSC"), NTSC_JSON).status_code == 200
    assert admin.get(_global("NTSC"))["configPolicies"] == json.loads(NTSC_JSON)
    assert admin.get(_workspace(ws, "NTSC")) == {"configPolicies": {}}
    assert admin.get(_global("EXPERIMENT")) == {"configPolicies": {}}
    # Putting again replaces the whole document.
    assert _put(admin, _workspace(ws, "EXPERIMENT"), "constraints: {priority_limit: 5}").ok
    assert admin.get(_workspace(ws, "EXPERIMENT"))["configPolicies"] == {
        "constraints": {"priority_limit": 5}
    }
    assert admin.request("DELETE", _workspace(ws, "EXPERIMENT")).json() == {}
    assert admin.get(_workspace(ws, "EXPERIMENT")) == {"configPolicies": {}}
    assert admin.request("DELETE", _workspace(ws, "EXPERIMENT")).status_code == 200  # idempotent
    assert admin.request("DELETE", _global("NTSC")).status_code == 200
    assert admin.get(_global("NTSC")) == {"configPolicies": {}}
    # Deleting the workspace drops its policies with it.
    assert _put(admin, _workspace(ws, "NTSC"), NTSC_JSON).ok
    assert _stored(master, ws) == 1
    assert admin.request("DELETE", f"/api/v1/workspaces/{ws}").status_code == 200
    wait_for(lambda: not _stored(master, ws), 30, "the deleted workspace's policies to go")
    _refused(admin.request("GET", _workspace(ws, "NTSC")), 404, f"workspace {ws}")


def _stored(master: Any, ws: int) -> int:
    """How many policy rows the database holds for workspace ``ws``."""
    from sqlalchemy import func, select

    from determined.master.db._policy_models import TaskConfigPolicy

    with master.db.read() as session:
        stmt = select(func.count()).where(TaskConfigPolicy.workspace_id == ws)
        return int(session.scalar(stmt) or 0)


@pytest.mark.parametrize(
    ("path", "text", "status", "fragment"),
    [
        (_global("BOGUS"), "constraints: {}", 400, "workloadType"),
        (_global("EXPERIMENT"), "", 400, "configPolicies: required"),
        (_global("EXPERIMENT"), "[1, 2]", 400, "configPolicies: must be a mapping"),
        (_global("EXPERIMENT"), "constraintz: {}", 400, "configPolicies.constraintz"),
        (_global("EXPERIMENT"), "constraints: {max_slots: 2}", 400, "constraints.max_slots"),
        (
            _global("EXPERIMENT"),
            "constraints: {resources: {max_slots: -1}}",
            400,
            "constraints.resources.max_slots",
        ),
        (
            _global("EXPERIMENT"),
            "constraints: {priority_limit: high}",
            400,
            "constraints.priority_limit",
        ),
        (
            _global("EXPERIMENT"),
            "invariant_config: {resources: {slots_per_trial: x}}",
            400,
            "invariant_config.resources.slots_per_trial",
        ),
        (
            _global("EXPERIMENT"),
            "invariant_config: {nonsense: 1}",
            400,
            "invariant_config.nonsense",
        ),
        (
            _global("EXPERIMENT"),
            "invariant_config: {resources: {priority: 3}}\nconstraints: {priority_limit: 10}",
            400,
            "invariant_config.resources.priority",
        ),
        (
            _global("EXPERIMENT"),
            "invariant_config: {resources: {slots_per_trial: 8}}\n"
            "constraints: {resources: {max_slots: 2}}",
            400,
            "invariant_config.resources.slots_per_trial",
        ),
        (_global("NTSC"), "invariant_config: {description: x}", 400, "invariant_config"),
        (_global("EXPERIMENT"), "a: [b", 400, "configPolicies: invalid YAML"),
        (_workspace(4242, "EXPERIMENT"), "constraints: {}", 404, "workspace 4242"),
    ],
)
def test_bad_policies_are_refused_naming_the_field(
    admin: Client, path: str, text: str, status: int, fragment: str
) -> None:
    _refused(_put(admin, path, text), status, fragment)


def test_only_admins_and_the_owner_change_them_under_basic_authz(
    basic_master: Any, admin: Client
) -> None:
    owner = _user(basic_master, admin, "cp-owner")
    other = _user(basic_master, admin, "cp-other")
    ws = _new_workspace(owner, "cp-owned")
    _refused(_put(owner, _global("EXPERIMENT"), "constraints: {}"), 403)
    _refused(owner.request("DELETE", _global("EXPERIMENT")), 403)
    assert owner.get(_global("EXPERIMENT")) == {"configPolicies": {}}  # reading is for everybody
    _refused(_put(other, _workspace(ws, "NTSC"), NTSC_JSON), 403, "owner")
    assert _put(owner, _workspace(ws, "NTSC"), NTSC_JSON).status_code == 200
    assert other.get(_workspace(ws, "NTSC"))["configPolicies"] == json.loads(NTSC_JSON)
    _refused(other.request("DELETE", _workspace(ws, "NTSC")), 403)
    assert admin.request("DELETE", _workspace(ws, "NTSC")).status_code == 200


def test_rbac_needs_the_config_policy_permissions(make_master: Any) -> None:
    master = make_master()
    admin = Client(master.url).login("admin")
    ws = _new_workspace(admin, "cp-rbac")
    user = _user(master, admin, "cp-rbac-user")
    _refused(_put(user, _global("NTSC"), NTSC_JSON), 403, "MODIFY_GLOBAL_CONFIG_POLICIES")
    _refused(user.request("GET", _global("NTSC")), 403, "VIEW_GLOBAL_CONFIG_POLICIES")
    _refused(user.request("GET", _workspace(ws, "NTSC")), 404, f"workspace {ws}")
    users = det_client.Client(master.session("admin")).users.list()["users"]
    user_id = next(u["id"] for u in users if u["username"] == "cp-rbac-user")
    grant = {"roleId": 4, "userId": user_id, "workspaceId": ws}  # Viewer
    admin.post("/api/v1/roles/add-assignments", {"userRoleAssignments": [_assignment(grant)]})
    assert user.get(_workspace(ws, "NTSC")) == {"configPolicies": {}}
    _refused(_put(user, _workspace(ws, "NTSC"), NTSC_JSON), 403, "MODIFY_WORKSPACE_CONFIG")
    grant["roleId"] = 2  # WorkspaceAdmin
    admin.post("/api/v1/roles/add-assignments", {"userRoleAssignments": [_assignment(grant)]})
    assert _put(user, _workspace(ws, "NTSC"), NTSC_JSON).status_code == 200


def _assignment(grant: dict[str, int]) -> dict[str, Any]:
    return {
        "userId": grant["userId"],
        "roleAssignment": {
            "role": {"roleId": grant["roleId"]},
            "scopeWorkspaceId": grant["workspaceId"],
        },
    }


def test_invariant_config_reaches_the_trial_and_constraints_refuse(
    basic_master: Any, admin: Client
) -> None:
    ws = _new_workspace(admin, "cp-apply")
    project = _project_in(admin, ws, "p")
    assert _put(admin, _workspace(ws, "EXPERIMENT"), POLICIES_YAML).ok

    def create(**overrides: Any) -> requests.Response:
        config = exp_config(**overrides)
        body = {
            "config": json.dumps(config),
            "modelDefinition": _files({"trial.py": ENV_TRIAL}),
            "projectId": project,
            "activate": True,
        }
        return admin.request("POST", "/api/v1/experiments", json=body)

    environment = {"environment_variables": ["FORCED=by-user", "MINE=kept"]}
    made = create(description="mine", environment=environment)
    assert made.status_code == 200, made.text
    exp_id = made.json()["experiment"]["id"]
    config = made.json()["config"]
    assert config["description"] == "set by the admins"
    assert config["environment"]["environment_variables"]["cpu"][-1] == "FORCED=by-policy"
    assert "MINE=kept" in config["environment"]["environment_variables"]["cpu"]
    admin.wait_state(exp_id, "STATE_COMPLETED", timeout=120)
    logs = admin.all_logs(exp_id)
    assert "FORCED=by-policy" in logs, logs
    # The global policy wins over the workspace's, field by field.
    assert _put(admin, _global("EXPERIMENT"), "constraints: {priority_limit: 30}").ok
    try:
        _refused(create(resources={"slots_per_trial": 3}), 400, "resources.slots_per_trial", "2")
        _refused(
            create(resources={"slots_per_trial": 1, "max_slots": 4}), 400, "resources.max_slots"
        )
        _refused(
            create(resources={"slots_per_trial": 1, "priority": 20}),
            400,
            "resources.priority",
            "30",
            "global",
        )
        fine = create(resources={"slots_per_trial": 1, "priority": 40}, hyperparameters={})
        assert fine.status_code == 200, fine.text
        fine_id = fine.json()["experiment"]["id"]
        patch = f"/api/v1/experiments/{fine_id}"
        too_urgent = {"resources": {"priority": 5}}
        _refused(admin.request("PATCH", patch, json=too_urgent), 400, "resources.priority")
        too_big = {"resources": {"max_slots": 3}}
        _refused(admin.request("PATCH", patch, json=too_big), 400, "resources.max_slots")
        ok = admin.request("PATCH", patch, json={"resources": {"priority": 35, "max_slots": 2}})
        assert ok.status_code == 200, ok.text
        admin.post(f"/api/v1/experiments/{fine_id}/kill")
        # Experiments elsewhere only see the global policy.
        other = create_in(admin, 1, resources={"slots_per_trial": 3, "priority": 40})
        assert other.status_code == 200, other.text
        assert other.json()["config"]["description"] != "set by the admins"
        admin.post(f"/api/v1/experiments/{other.json()['experiment']['id']}/kill")
    finally:
        admin.request("DELETE", _global("EXPERIMENT"))


def create_in(admin: Client, project: int, **overrides: Any) -> requests.Response:
    body = {
        "config": json.dumps(exp_config(**overrides)),
        "modelDefinition": _files({"trial.py": TRIAL_SCRIPT}),
        "projectId": project,
        "activate": False,
    }
    return admin.request("POST", "/api/v1/experiments", json=body)


def _files(files: dict[str, str]) -> list[dict[str, Any]]:
    from master.conftest import context_files

    return context_files(dict(files))


def test_ntsc_constraints_refuse_commands(basic_master: Any, admin: Client) -> None:
    ws = _new_workspace(admin, "cp-ntsc")
    assert _put(admin, _workspace(ws, "NTSC"), NTSC_JSON).ok

    def launch(resources: dict[str, Any], entrypoint: str = "echo policy-ok") -> requests.Response:
        config = {"entrypoint": entrypoint, "resources": resources}
        body = {"config": config, "workspaceId": ws}
        return admin.request("POST", "/api/v1/commands", json=body)

    _refused(launch({"slots": 2}), 400, "resources.slots", "1")
    _refused(launch({"slots": 0, "priority": 5}), 400, "resources.priority", "20")
    ok = launch({"slots": 1, "priority": 25})
    assert ok.status_code == 200, ok.text
    command_id = ok.json()["command"]["id"]
    api = det_client.Client(basic_master.session("admin"))
    deadline = time.monotonic() + 60
    while api.commands.get(command_id)["command"]["state"] != "STATE_TERMINATED":
        assert time.monotonic() < deadline, "the command did not end"
        time.sleep(0.1)
    text = "".join(e.get("log") or "" for e in api.tasks.logs(command_id))
    assert "policy-ok" in text
    # A waiting or running command's priority stays within the limit.
    sleeper = launch({"slots": 0, "priority": 25}, "sleep 60").json()["command"]["id"]
    path = f"/api/v1/commands/{sleeper}/set_priority"
    _refused(admin.request("POST", path, json={"priority": 5}), 400, "resources.priority")
    assert admin.request("POST", path, json={"priority": 30}).status_code == 200
    admin.post(f"/api/v1/commands/{sleeper}/kill")
    # Commands in other workspaces are not limited.
    elsewhere = admin.request(
        "POST",
        "/api/v1/commands",
        json={"config": {"entrypoint": "true", "resources": {"slots": 2}}},
    )
    assert elsewhere.status_code == 200, elsewhere.text


@pytest.fixture
def det(
    basic_master: Any,
    tmp_path: pathlib.Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> Any:
    """``det`` in-process against the module's master, logged in as admin."""
    from cli.harness import Det

    for name in ("DET_USER_TOKEN", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DET_MASTER", basic_master.url)
    monkeypatch.setenv("DET_CONFIG_DIR", str(tmp_path / "det-config"))
    monkeypatch.setenv("DET_USER", "admin")
    monkeypatch.setenv("DET_PASS", "")
    return Det(basic_master.url, tmp_path / "det-config", capsys)


def test_det_config_policies(det: Any, admin: Client, tmp_path: pathlib.Path) -> None:
    """``det config-policies`` set/describe/delete, with upstream's output."""
    _new_workspace(admin, "cp-cli")
    policies = tmp_path / "policies.yaml"
    policies.write_text(POLICIES_YAML)
    out = det.ok("config-policies", "set", "experiment", str(policies), "-w", "cp-cli")
    assert out.splitlines()[0] == "Set experiment config policies for workspace cp-cli:"
    assert yaml.safe_load(out.split("\n", 1)[1]) == yaml.safe_load(POLICIES_YAML)
    described = det.ok("cp", "describe", "experiment", "--workspace-name", "cp-cli")
    assert described.rstrip() == yaml.safe_dump(yaml.safe_load(POLICIES_YAML)).rstrip()
    as_json = det.ok("config-policies", "describe", "experiment", "-w", "cp-cli", "--json")
    assert json.loads(as_json) == yaml.safe_load(POLICIES_YAML)
    ntsc = tmp_path / "ntsc.json"
    ntsc.write_text(NTSC_JSON)
    out = det.ok("config-policies", "set", "tasks", str(ntsc))
    assert out.startswith("Set global tasks config policies:\n")
    assert admin.get(_global("NTSC"))["configPolicies"] == json.loads(NTSC_JSON)
    out = det.ok("config-policies", "delete", "tasks")
    assert "Successfully deleted global NTSC config policies" in out
    out = det.ok("config-policies", "delete", "experiment", "-w", "cp-cli")
    assert "Successfully deleted EXPERIMENT config policies for workspace cp-cli" in out
    code, _, err = det.run("config-policies", "set", "experiment", str(tmp_path / "none.yaml"))
    assert code != 0 and "No such file or directory" in err
    code, _, err = det.run("config-policies", "describe", "experiment", "-w", "nowhere")
    assert code != 0 and "nowhere" in err
    bad = tmp_path / "bad.yaml"
    bad.write_text("constraints: {max_slots: 1}\n")
    code, _, err = det.run("config-policies", "set", "experiment", str(bad))
    assert code != 0 and "constraints.max_slots" in err


def test_one_row_per_scope_on_sqlite_and_postgresql(master: Any) -> None:
    """Putting twice replaces the row of its scope (the global rows have a partial unique index
    of their own) on both databases."""
    admin = Client(master.url).login("admin")
    for text in ("constraints: {priority_limit: 3}", "constraints: {priority_limit: 4}"):
        assert _put(admin, _global("EXPERIMENT"), text).status_code == 200
        assert _put(admin, _workspace(1, "EXPERIMENT"), text).status_code == 200
    assert _put(admin, _global("NTSC"), NTSC_JSON).status_code == 200
    assert admin.get(_global("EXPERIMENT"))["configPolicies"] == {
        "constraints": {"priority_limit": 4}
    }
    assert admin.get(_workspace(1, "EXPERIMENT"))["configPolicies"] == {
        "constraints": {"priority_limit": 4}
    }
    from sqlalchemy import func, select

    from determined.master.db._policy_models import TaskConfigPolicy

    with master.db.read() as session:
        assert session.scalar(select(func.count()).select_from(TaskConfigPolicy)) == 3
