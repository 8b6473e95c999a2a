"""RBAC enforced on every kind of object: experiments, trials, checkpoints, models, tasks.

One master for the module. Workspace ``team`` holds a completed experiment (a trial, checkpoints,
logs), a paused experiment, a registered model with a version and a running command. Five users
look at it: a Viewer, an Editor, a WorkspaceAdmin of ``team``, a ClusterAdmin (by role, not the
``admin`` flag) and an outsider with no role in ``team`` (a member of the default workspace only).
Each refused action answers 403 naming the permission (or 404 for what the caller may not even
see, as upstream) and changes nothing; listings, searches and downloads never show another
workspace's objects. Through REST, ``det`` and the SDK.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import pathlib
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from cli.harness import TRIAL, experiment_config, wait_for

from determined import client

DET = pathlib.Path(sys.executable).parent / "det"
_names = itertools.count()


def _unique(prefix: str) -> str:
    return f"{prefix}{next(_names)}"


@dataclasses.dataclass
class World:
    master: Any
    admin: client.Session
    users: dict[str, client.Session]  # viewer, editor, wsadmin, cadmin, outsider
    ids: dict[str, int]  # user ids
    ws: int
    project: int
    done_exp: int
    paused_exp: int
    trial: int
    uuid: str
    model: str
    command: str
    label: str
    config_dir: pathlib.Path
    files: list[dict[str, Any]]


def _status(call: Any) -> tuple[int, str]:
    """(status, message) of a refused request; fails when the request succeeds."""
    with pytest.raises(client.APIError) as info:
        call()
    return info.value.status, info.value.message


def _forbidden(call: Any, permission: str) -> None:
    status, message = _status(call)
    assert status == 403, message
    assert "permission denied" in message and permission in message, message


def _not_found(call: Any, what: str) -> None:
    status, message = _status(call)
    assert status == 404, message
    assert f"{what} not found" in message, message


@pytest.fixture(scope="module")
def world(make_module_master: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    master = make_module_master()
    admin = master.session("admin")
    users: dict[str, client.Session] = {}
    ids: dict[str, int] = {}
    for role in ("viewer", "editor", "wsadmin", "cadmin", "outsider"):
        name = _unique(role)
        user = {"username": name, "active": True}
        ids[role] = client.Client(admin).users.create(user, client.hash_password(""))["user"]["id"]
        users[role] = master.session(name)
    ws = admin.request("POST", "/api/v1/workspaces", body={"name": _unique("team")})
    ws_id = int(ws["workspace"]["id"])
    project = admin.request(
        "POST",
        f"/api/v1/workspaces/{ws_id}/projects",
        body={"name": "p", "workspaceId": ws_id},
    )["project"]["id"]
    rbac = client.Client(admin).rbac
    for role, role_id in (("viewer", 4), ("editor", 5), ("wsadmin", 2)):
        rbac.assign(role_id, user_id=ids[role], workspace_id=ws_id)
    rbac.assign(1, user_id=ids["cadmin"])  # ClusterAdmin, cluster-wide

    files = client.read_context_dir(_context(tmp_path_factory, TRIAL))
    editor = users["editor"]
    label = _unique("secret-label")
    done = client.create_experiment(
        editor,
        experiment_config(name="team-done", labels=[label]),
        files,
        project_id=project,
    ).id
    paused = client.create_experiment(
        editor, experiment_config(name="team-paused"), files, project_id=project, activate=False
    ).id

    def finished() -> bool:
        state = editor.request("GET", f"/api/v1/experiments/{done}")["experiment"]["state"]
        assert state not in ("STATE_ERROR", "STATE_CANCELED"), state
        return state == "STATE_COMPLETED"

    wait_for(finished, "the team experiment completes", timeout=240)
    trial = editor.request("GET", f"/api/v1/experiments/{done}/trials")["trials"][0]["id"]
    ckpts = editor.request("GET", f"/api/v1/experiments/{done}/checkpoints")["checkpoints"]
    # The last checkpoint (the latest and best) is the one checkpoint GC keeps.
    uuid = max(ckpts, key=lambda c: int(c["metadata"]["steps_completed"]))["uuid"]
    model = _unique("team-model")
    editor.request(
        "POST", "/api/v1/models", body={"name": model, "workspaceId": ws_id, "labels": [label]}
    )
    editor.request("POST", f"/api/v1/models/{model}/versions", body={"checkpointUuid": uuid})
    command = users["wsadmin"].request(
        "POST",
        "/api/v1/commands",
        body={"config": {"entrypoint": "sleep 300"}, "workspaceId": ws_id},
    )["command"]["id"]
    config_dir = tmp_path_factory.mktemp("det-config")
    old = os.environ.get("DET_CONFIG_DIR")
    os.environ["DET_CONFIG_DIR"] = str(config_dir)
    try:
        yield World(
            master,
            admin,
            users,
            ids,
            ws_id,
            project,
            done,
            paused,
            trial,
            uuid,
            model,
            command,
            label,
            config_dir,
            files,
        )
    finally:
        if old is None:
            os.environ.pop("DET_CONFIG_DIR", None)
        else:
            os.environ["DET_CONFIG_DIR"] = old
        admin.request("POST", f"/api/v1/tasks/{command}/kill")


def _context(factory: pytest.TempPathFactory, trial: str) -> pathlib.Path:
    path = factory.mktemp("context")
    (path / "train.py").write_text(trial)
    return path


def _download(session: client.Session, uuid: str) -> int:
    import io

    return session.download(f"/checkpoints/{uuid}", io.BytesIO(), accept="application/gzip")


def _exp_state(w: World, exp_id: int) -> dict[str, Any]:
    return w.admin.request("GET", f"/api/v1/experiments/{exp_id}")["experiment"]  # type: ignore


def test_outsider_sees_nothing_of_the_workspace(world: World) -> None:
    w, out = world, world.users["outsider"]
    exp, trial, uuid, model = w.done_exp, w.trial, w.uuid, w.model
    # Single objects: 404, the very message of an object that does not exist.
    _not_found(lambda: out.request("GET", f"/api/v1/experiments/{exp}"), f"experiment {exp}")
    missing = _status(lambda: out.request("GET", "/api/v1/experiments/987654"))[1]
    assert missing == "experiment 987654 not found"
    for path in (
        f"/api/v1/experiments/{exp}/trials",
        f"/api/v1/experiments/{exp}/checkpoints",
        f"/api/v1/experiments/{exp}/model_def",
        f"/api/v1/experiments/{exp}/validation-history",
    ):
        _not_found(lambda p=path: out.request("GET", p), f"experiment {exp}")
    for path in (
        f"/api/v1/trials/{trial}",
        f"/api/v1/trials/{trial}/checkpoints",
        f"/api/v1/trials/{trial}/workloads",
        f"/api/v1/trials/{trial}/logs",
    ):
        _not_found(lambda p=path: out.request("GET", p), f"trial {trial}")
    _not_found(
        lambda: out.request(
            "GET", "/api/v1/trials/metrics/trial_metrics", params={"trialIds": trial}
        ),
        f"trial {trial}",
    )
    for path in (f"/api/v1/checkpoints/{uuid}", f"/api/v1/checkpoints/{uuid}/metrics"):
        _not_found(lambda p=path: out.request("GET", p), f"checkpoint {uuid}")
    _not_found(lambda: _download(out, uuid), f"checkpoint {uuid}")
    for path in (f"/api/v1/models/{model}", f"/api/v1/models/{model}/versions"):
        _not_found(lambda p=path: out.request("GET", p), f"model {model!r}")
    _not_found(lambda: out.request("GET", f"/api/v1/commands/{w.command}"), f"task {w.command}")
    _not_found(lambda: out.request("GET", f"/api/v1/tasks/{w.command}"), f"task {w.command}")
    # Listings and searches: nothing of the workspace.
    listed = out.request("GET", "/api/v1/experiments", params={"limit": 500})["experiments"]
    assert not {e["id"] for e in listed} & {w.done_exp, w.paused_exp}
    by_label = out.request("GET", "/api/v1/experiments", params={"labels": w.label})
    assert by_label["experiments"] == [] and by_label["pagination"]["total"] == 0
    assert (
        out.request("GET", "/api/v1/experiments", params={"projectId": w.project})["experiments"]
        == []
    )
    assert model not in {m["name"] for m in out.request("GET", "/api/v1/models")["models"]}
    assert w.label not in out.request("GET", "/api/v1/model/labels")["labels"]
    assert w.command not in {c["id"] for c in out.request("GET", "/api/v1/commands")["commands"]}
    assert out.request("GET", "/api/v1/tasks/count")["commands"] == 0
    summaries = out.request("GET", "/api/v1/tasks")["allocationIdToSummary"].values()
    assert w.command not in {s["taskId"] for s in summaries}
    for job in out.request("GET", "/api/v1/job-queues")["jobs"]:
        assert job["entityId"] not in (str(w.done_exp), str(w.paused_exp), w.command)
    # Actions: the same 404, and nothing changed.
    before = _exp_state(w, w.paused_exp)
    _not_found(
        lambda: out.request("POST", f"/api/v1/experiments/{w.paused_exp}/kill"),
        f"experiment {w.paused_exp}",
    )
    _not_found(
        lambda: out.request("PATCH", f"/api/v1/experiments/{w.paused_exp}", body={"name": "x"}),
        f"experiment {w.paused_exp}",
    )
    assert _exp_state(w, w.paused_exp)["state"] == before["state"] == "STATE_PAUSED"
    assert _exp_state(w, w.paused_exp)["name"] == before["name"]
    _not_found(
        lambda: out.request("DELETE", "/api/v1/checkpoints", body={"checkpointUuids": [uuid]}),
        f"checkpoint {uuid}",
    )
    _not_found(
        lambda: out.request("POST", f"/api/v1/commands/{w.command}/kill"), f"task {w.command}"
    )
    _not_found(
        lambda: client.create_experiment(
            out,
            experiment_config(),
            w.files,
            project_id=w.project,
        ),
        f"project {w.project}",
    )
    _not_found(
        lambda: out.request(
            "POST", "/api/v1/commands", body={"config": {"entrypoint": "true"}, "workspaceId": w.ws}
        ),
        f"workspace {w.ws}",
    )
    # The outsider is still a member of the default workspace: it runs its own things there.
    mine = out.request("POST", "/api/v1/models", body={"name": _unique("own-model")})["model"]
    assert mine["workspaceId"] == 1
    # Cluster usage is the ClusterAdmin's.
    _forbidden(
        lambda: out.request("GET", "/api/v1/resources/allocation/raw", params=_range()),
        "PERMISSION_TYPE_VIEW_CLUSTER_USAGE",
    )


def _range() -> dict[str, str]:
    return {"timestampAfter": "2000-01-01T00:00:00Z", "timestampBefore": "2100-01-01T00:00:00Z"}


def test_viewer_sees_but_cannot_change(world: World) -> None:
    w, viewer = world, world.users["viewer"]
    exp, paused = w.done_exp, w.paused_exp
    # Sees everything of the workspace.
    assert viewer.request("GET", f"/api/v1/experiments/{exp}")["experiment"]["id"] == exp
    listed = viewer.request("GET", "/api/v1/experiments", params={"labels": w.label})
    assert [e["id"] for e in listed["experiments"]] == [exp]
    assert viewer.request("GET", f"/api/v1/trials/{w.trial}")["trial"]["id"] == w.trial
    assert viewer.request("GET", f"/api/v1/checkpoints/{w.uuid}")["checkpoint"]["uuid"] == w.uuid
    assert _download(viewer, w.uuid) > 0
    assert viewer.request("GET", f"/api/v1/models/{w.model}")["model"]["name"] == w.model
    assert w.command in {c["id"] for c in viewer.request("GET", "/api/v1/commands")["commands"]}
    # Cannot change anything: 403 naming the permission, and nothing changed.
    before = _exp_state(w, paused)
    for action in ("activate", "kill", "cancel", "pause"):
        _forbidden(
            lambda a=action: viewer.request("POST", f"/api/v1/experiments/{paused}/{a}"),
            "PERMISSION_TYPE_UPDATE_EXPERIMENT",
        )
    for action in ("archive", "unarchive"):
        _forbidden(
            lambda a=action: viewer.request("POST", f"/api/v1/experiments/{exp}/{a}"),
            "PERMISSION_TYPE_UPDATE_EXPERIMENT_METADATA",
        )
    _forbidden(
        lambda: viewer.request("PATCH", f"/api/v1/experiments/{paused}", body={"name": "mine"}),
        "PERMISSION_TYPE_UPDATE_EXPERIMENT_METADATA",
    )
    _forbidden(
        lambda: viewer.request("DELETE", f"/api/v1/experiments/{exp}"),
        "PERMISSION_TYPE_DELETE_EXPERIMENT",
    )
    _forbidden(
        lambda: viewer.request("POST", f"/api/v1/trials/{w.trial}/kill"),
        "PERMISSION_TYPE_UPDATE_EXPERIMENT",
    )
    after = _exp_state(w, paused)
    assert (
        (after["state"], after["name"])
        == (before["state"], before["name"])
        == (
            "STATE_PAUSED",
            "team-paused",
        )
    )
    assert _exp_state(w, exp)["state"] == "STATE_COMPLETED"
    assert not _exp_state(w, exp)["archived"]
    _forbidden(
        lambda: viewer.request(
            "POST", f"/api/v1/checkpoints/{w.uuid}/metadata", body={"checkpoint": {"metadata": {}}}
        ),
        "PERMISSION_TYPE_UPDATE_EXPERIMENT_METADATA",
    )
    _forbidden(
        lambda: viewer.request("DELETE", "/api/v1/checkpoints", body={"checkpointUuids": [w.uuid]}),
        "PERMISSION_TYPE_DELETE_EXPERIMENT",
    )
    ckpt = w.admin.request("GET", f"/api/v1/checkpoints/{w.uuid}")["checkpoint"]
    assert ckpt["state"] == "STATE_COMPLETED" and ckpt["metadata"].get("steps_completed")
    _forbidden(
        lambda: viewer.request("PATCH", f"/api/v1/models/{w.model}", body={"description": "x"}),
        "PERMISSION_TYPE_EDIT_MODEL_REGISTRY",
    )
    _forbidden(
        lambda: viewer.request("DELETE", f"/api/v1/models/{w.model}"),
        "PERMISSION_TYPE_DELETE_MODEL_REGISTRY",
    )
    _forbidden(
        lambda: viewer.request("DELETE", f"/api/v1/models/{w.model}/versions/1"),
        "PERMISSION_TYPE_DELETE_MODEL",
    )
    model = w.admin.request("GET", f"/api/v1/models/{w.model}")["model"]
    assert model["description"] == "" and model["numVersions"] == 1
    _forbidden(
        lambda: viewer.request("POST", f"/api/v1/commands/{w.command}/kill"),
        "PERMISSION_TYPE_UPDATE_NSC",
    )
    assert w.admin.request("GET", f"/api/v1/commands/{w.command}")["command"]["state"] in (
        "STATE_QUEUED",
        "STATE_PULLING",
        "STATE_STARTING",
        "STATE_RUNNING",
    )
    _forbidden(
        lambda: client.create_experiment(
            viewer,
            experiment_config(),
            w.files,
            project_id=w.project,
        ),
        "PERMISSION_TYPE_CREATE_EXPERIMENT",
    )
    _forbidden(
        lambda: viewer.request(
            "POST", "/api/v1/commands", body={"config": {"entrypoint": "true"}, "workspaceId": w.ws}
        ),
        "PERMISSION_TYPE_CREATE_NSC",
    )
    _forbidden(
        lambda: viewer.request(
            "POST", "/api/v1/models", body={"name": _unique("m"), "workspaceId": w.ws}
        ),
        "PERMISSION_TYPE_CREATE_MODEL_REGISTRY",
    )


def test_editor_changes_the_workspace_but_not_colleagues_things(world: World) -> None:
    w, editor = world, world.users["editor"]
    paused = w.paused_exp
    editor.request("PATCH", f"/api/v1/experiments/{paused}", body={"description": "edited"})
    assert _exp_state(w, paused)["description"] == "edited"
    editor.request("POST", f"/api/v1/experiments/{w.done_exp}/archive")
    editor.request("POST", f"/api/v1/experiments/{w.done_exp}/unarchive")
    editor.request("PATCH", f"/api/v1/models/{w.model}", body={"description": "by the editor"})
    metadata = {"checkpoint": {"metadata": {"steps_completed": 4, "note": "kept"}}}
    editor.request("POST", f"/api/v1/checkpoints/{w.uuid}/metadata", body=metadata)
    assert (
        w.admin.request("GET", f"/api/v1/checkpoints/{w.uuid}")["checkpoint"]["metadata"]["note"]
        == "kept"
    )
    # Its own command: yes; the WorkspaceAdmin's: only the owner or a WorkspaceAdmin.
    own = editor.request(
        "POST",
        "/api/v1/commands",
        body={"config": {"entrypoint": "sleep 300"}, "workspaceId": w.ws},
    )["command"]
    assert own["workspaceId"] == w.ws
    status, message = _status(lambda: editor.request("POST", f"/api/v1/commands/{w.command}/kill"))
    assert status == 403 and "owner" in message, message
    editor.request("POST", f"/api/v1/commands/{own['id']}/kill")
    # The editor sees nothing of a second workspace it has no role in.
    other = w.admin.request("POST", "/api/v1/workspaces", body={"name": _unique("other")})
    other_ws = other["workspace"]["id"]
    hidden = w.admin.request(
        "POST", "/api/v1/models", body={"name": _unique("hidden"), "workspaceId": other_ws}
    )
    _not_found(
        lambda: editor.request("GET", f"/api/v1/models/{hidden['model']['name']}"),
        f"model {hidden['model']['name']!r}",
    )
    # Moving the model there needs CREATE_MODEL_REGISTRY on the destination: it cannot see it.
    _not_found(
        lambda: editor.request(
            "POST", f"/api/v1/models/{w.model}/move", body={"destinationWorkspaceId": other_ws}
        ),
        f"workspace {other_ws}",
    )
    assert w.admin.request("GET", f"/api/v1/models/{w.model}")["model"]["workspaceId"] == w.ws
    _forbidden(
        lambda: editor.request("GET", "/api/v1/resources/allocation/raw", params=_range()),
        "PERMISSION_TYPE_VIEW_CLUSTER_USAGE",
    )


def test_workspace_admin_and_cluster_admin(world: World) -> None:
    w, wsadmin, cadmin = world, world.users["wsadmin"], world.users["cadmin"]
    # A ClusterAdmin by role sees and changes everything, like the admin flag.
    other = w.admin.request("POST", "/api/v1/workspaces", body={"name": _unique("far")})
    far = w.admin.request(
        "POST",
        "/api/v1/models",
        body={"name": _unique("far-model"), "workspaceId": other["workspace"]["id"]},
    )["model"]["name"]
    assert cadmin.request("GET", f"/api/v1/models/{far}")["model"]["name"] == far
    _not_found(lambda: wsadmin.request("GET", f"/api/v1/models/{far}"), f"model {far!r}")
    listed = {
        e["id"]
        for e in cadmin.request("GET", "/api/v1/experiments", params={"limit": 500})["experiments"]
    }
    assert {w.done_exp, w.paused_exp} <= listed
    cadmin.request("GET", "/api/v1/resources/allocation/raw", params=_range())
    # The WorkspaceAdmin kills and deletes the Editor's experiment in its workspace.
    victim = client.create_experiment(
        w.users["editor"],
        experiment_config(name="doomed"),
        w.files,
        project_id=w.project,
        activate=False,
    ).id
    wsadmin.request("POST", f"/api/v1/experiments/{victim}/kill")
    wait_for(
        lambda: _exp_state(w, victim)["state"] in ("STATE_CANCELED", "STATE_COMPLETED"),
        "the killed experiment ends",
    )
    _forbidden(  # the viewer still may not delete it
        lambda: w.users["viewer"].request("DELETE", f"/api/v1/experiments/{victim}"),
        "PERMISSION_TYPE_DELETE_EXPERIMENT",
    )
    wsadmin.request("DELETE", f"/api/v1/experiments/{victim}")

    def gone() -> bool:
        try:
            w.admin.request("GET", f"/api/v1/experiments/{victim}")
        except client.APIError as e:
            return e.status == 404
        return False

    wait_for(gone, "the deleted experiment is gone")


def _det(w: World, role: str, *argv: str) -> subprocess.CompletedProcess[str]:
    session = w.users[role]
    username = session.request("GET", "/api/v1/me")["user"]["username"]
    env = dict(os.environ)
    env.update(
        {
            "DET_MASTER": w.master.url,
            "DET_USER": username,
            "DET_USER_TOKEN": str(session.token),
            "DET_CONFIG_DIR": str(w.config_dir / role),
        }
    )
    env.pop("DET_PASS", None)
    return subprocess.run(
        [str(DET), *argv], capture_output=True, text=True, env=env, timeout=120, check=False
    )


def test_det_cli_and_sdk(world: World) -> None:
    w = world
    listed = _det(w, "outsider", "experiment", "list", "--all", "--json")
    assert listed.returncode == 0, listed.stderr
    assert str(w.done_exp) not in {str(e.get("id")) for e in yaml.safe_load(listed.stdout or "[]")}
    shown = _det(w, "viewer", "experiment", "list", "--all", "--json")
    assert w.done_exp in {e.get("id") for e in yaml.safe_load(shown.stdout)}, shown.stdout
    refused = _det(w, "viewer", "experiment", "kill", str(w.paused_exp))
    assert refused.returncode != 0
    assert "PERMISSION_TYPE_UPDATE_EXPERIMENT" in refused.stderr + refused.stdout
    hidden = _det(w, "outsider", "checkpoint", "describe", w.uuid)
    assert hidden.returncode != 0 and "not found" in hidden.stderr + hidden.stdout
    assert _exp_state(w, w.paused_exp)["state"] == "STATE_PAUSED"

    from determined.experimental import Determined

    out_name = w.users["outsider"].request("GET", "/api/v1/me")["user"]["username"]
    sdk = Determined(master=w.master.url, user=out_name, password="")
    assert w.done_exp not in {e.id for e in sdk.list_experiments()}
    with pytest.raises(Exception, match="not found"):
        sdk.get_experiment(w.done_exp).reload()
    with pytest.raises(Exception, match="not found"):
        sdk.get_model(w.model)
    viewer_name = w.users["viewer"].request("GET", "/api/v1/me")["user"]["username"]
    viewer = Determined(master=w.master.url, user=viewer_name, password="")
    assert viewer.get_model(w.model).name == w.model
    with pytest.raises(Exception, match="PERMISSION_TYPE_UPDATE_EXPERIMENT"):
        viewer.get_experiment(w.paused_exp).kill()
    assert _exp_state(w, w.paused_exp)["state"] == "STATE_PAUSED"


def test_rbac_off_is_upstreams_basic_authorization(
    make_module_master: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """``security.authz.type: basic``: every user sees and changes every workspace's experiments
    (the owner rule for deleting stays)."""
    master = make_module_master(security={"authz": {"type": "basic"}})
    admin = master.session("admin")
    users = client.Client(admin).users
    names = [_unique("basic"), _unique("basic")]
    for name in names:
        users.create({"username": name, "active": True}, client.hash_password(""))
    owner, other = master.session(names[0]), master.session(names[1])
    ws = admin.request("POST", "/api/v1/workspaces", body={"name": _unique("closed")})
    project = admin.request(
        "POST",
        f"/api/v1/workspaces/{ws['workspace']['id']}/projects",
        body={"name": "p", "workspaceId": ws["workspace"]["id"]},
    )["project"]["id"]
    files = client.read_context_dir(_context(tmp_path_factory, TRIAL))
    exp = client.create_experiment(
        owner, experiment_config(name="open"), files, project_id=project, activate=False
    ).id
    assert exp in {e["id"] for e in other.request("GET", "/api/v1/experiments")["experiments"]}
    other.request("PATCH", f"/api/v1/experiments/{exp}", body={"description": "by another"})
    other.request("POST", f"/api/v1/experiments/{exp}/kill")
    wait_for(
        lambda: (
            owner.request("GET", f"/api/v1/experiments/{exp}")["experiment"]["state"]
            == "STATE_CANCELED"
        ),
        "the experiment is canceled",
    )
    status, message = _status(lambda: other.request("DELETE", f"/api/v1/experiments/{exp}"))
    assert status == 403 and "owner" in message, message
