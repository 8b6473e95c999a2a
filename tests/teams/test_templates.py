"""Config templates: upstream's routes, ``det template``/``tpl`` and ``det e create --template``,
against a real master."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest
import yaml
from cli.harness import TRIAL, Det

from determined import client
from determined.experimental import Determined

TEMPLATE = {
    "description": "from the template",
    "hyperparameters": {"steps": 2, "base": 3.0},
    "resources": {"slots_per_trial": 1, "max_slots": 2},
    "searcher": {"name": "single", "metric": "validation_loss", "smaller_is_better": True},
    "max_restarts": 0,
}


@pytest.fixture
def det(
    module_master: Any,
    tmp_path: pathlib.Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> Det:
    """``det`` in this process, logged in as ``determined`` against the module's master."""
    for name in ("DET_USER", "DET_PASS", "DET_USER_TOKEN", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DET_MASTER", module_master.url)
    monkeypatch.setenv("DET_CONFIG_DIR", str(tmp_path / "det-config"))
    monkeypatch.setenv("DET_USER", "determined")
    monkeypatch.setenv("DET_PASS", "")
    return Det(module_master.url, tmp_path / "det-config", capsys)


@pytest.fixture
def templates(module_master: Any) -> client.TemplatesClient:
    return client.Client(module_master.session("determined")).templates


def test_rest_create_get_list_change_rename_delete(templates: client.TemplatesClient) -> None:
    created = templates.create("rest-a", {"description": "a"})["template"]
    assert created == {"name": "rest-a", "config": {"description": "a"}, "workspaceId": 1}
    templates.create("rest-b", {"description": "b"}, workspace_id=1)
    assert templates.get("rest-b")["template"]["config"] == {"description": "b"}

    page = templates.list({"name": "REST-", "limit": 1, "orderBy": "ORDER_BY_DESC"})
    assert [t["name"] for t in page["templates"]] == ["rest-b"]
    assert page["pagination"]["total"] == 2

    assert templates.set_config("rest-a", {"max_restarts": 1})["template"]["config"] == {
        "max_restarts": 1
    }
    upserted = templates.put("rest-c", {"description": "c"})["template"]
    assert upserted["name"] == "rest-c" and upserted["workspaceId"] == 1
    assert templates.put("rest-c", {"description": "c2"})["template"]["config"] == {
        "description": "c2"
    }
    assert templates.rename("rest-c", "rest-d")["template"]["name"] == "rest-d"
    templates.delete("rest-d")
    with pytest.raises(client.NotFoundError, match="template 'rest-d' not found"):
        templates.get("rest-d")
    names = [t["name"] for t in templates.list()["templates"]]
    assert "rest-a" in names and "rest-b" in names and "rest-d" not in names


def test_rest_refuses_bad_input_with_the_field(
    templates: client.TemplatesClient, module_master: Any
) -> None:
    templates.create("bad-dup", {})
    with pytest.raises(client.APIError, match="name: a template named 'bad-dup' already") as e:
        templates.create("bad-dup", {})
    assert e.value.status == 409
    session = module_master.session("determined")
    with pytest.raises(client.APIError, match="config: must be an object") as e:
        body = {"name": "bad-list", "config": ["not", "a", "mapping"]}
        session.request("POST", "/api/v1/templates/bad-list", body=body)
    assert e.value.status == 400
    with pytest.raises(client.APIError, match="config: required") as e:
        session.request("POST", "/api/v1/templates/bad-none", body={"name": "bad-none"})
    assert e.value.status == 400
    with pytest.raises(client.NotFoundError, match="workspace 999 not found"):
        templates.create("bad-ws", {}, workspace_id=999)
    with pytest.raises(client.NotFoundError, match="template 'nope' not found"):
        templates.set_config("nope", {})
    with pytest.raises(client.NotFoundError):
        templates.delete("nope")
    with pytest.raises(client.APIError, match="newName: a template named 'bad-dup'") as e:
        templates.create("bad-other", {})
        templates.rename("bad-other", "bad-dup")
    assert e.value.status == 409


def test_det_template_commands(det: Det, tmp_path: pathlib.Path) -> None:
    path = tmp_path / "tpl.yaml"
    path.write_text(yaml.safe_dump(TEMPLATE))
    assert "Set template cli-tpl" in det.ok("template", "set", "cli-tpl", str(path))
    listing = det.ok("tpl", "list")
    assert "cli-tpl" in listing and "Uncategorized" in listing
    assert "slots_per_trial: 1" not in listing
    assert "slots_per_trial: 1" in det.ok("tpl", "ls", "-d")
    assert yaml.safe_load(det.ok("tpl", "describe", "cli-tpl")) == TEMPLATE

    path.write_text(yaml.safe_dump({"max_restarts": 3}))
    det.ok("tpl", "set", "cli-tpl", str(path))  # exists: its config is replaced
    assert yaml.safe_load(det.ok("tpl", "describe", "cli-tpl")) == {"max_restarts": 3}
    path.write_text(yaml.safe_dump({"max_restarts": 4}))
    assert "Updated template" in det.ok("tpl", "set-value", "config", "cli-tpl", str(path))
    assert "Created template cli-tpl2" in det.ok("tpl", "create", "cli-tpl2", str(path))
    code, _, err = det.run("tpl", "create", "cli-tpl2", str(path))
    assert code != 0 and "already exists" in err

    assert "Removed template cli-tpl" in det.ok("tpl", "rm", "cli-tpl")
    code, _, err = det.run("tpl", "describe", "cli-tpl")
    assert code != 0 and "template 'cli-tpl' not found" in err
    path.write_text("- a list\n")
    code, _, err = det.run("tpl", "set", "cli-tpl3", str(path))
    assert code != 0 and "must be a YAML mapping" in err


def test_experiment_create_with_a_template_merges_it_under_the_config(
    det: Det, module_master: Any, tmp_path: pathlib.Path
) -> None:
    sdk = Determined._from_session(module_master.session("determined"))
    client.Client(module_master.session("determined")).templates.create("exp-tpl", TEMPLATE)
    context = tmp_path / "context"
    context.mkdir()
    (context / "train.py").write_text(TRIAL)
    mine = {
        "name": "with-template",
        "entrypoint": "python3 train.py",
        "hyperparameters": {"steps": 1},
        "resources": {"slots_per_trial": 1},
        "searcher": {"name": "single", "metric": "validation_loss", "max_length": 1},
    }
    config_file = tmp_path / "exp.yaml"
    config_file.write_text(yaml.safe_dump(mine))

    out = det.ok("e", "create", str(config_file), str(context), "--template", "exp-tpl", "--paused")
    exp_id = int(out.split("Created experiment ")[1].split()[0])
    config = sdk.get_experiment(exp_id).config
    assert config["name"] == "with-template" and config["description"] == "from the template"
    assert config["hyperparameters"] == {
        "steps": {"type": "const", "val": 1},
        "base": {"type": "const", "val": 3.0},
    }
    assert config["resources"]["max_slots"] == 2 and config["max_restarts"] == 0
    assert config["searcher"]["smaller_is_better"] is True

    exp = sdk.create_experiment(mine, context, template="exp-tpl", activate=False)
    assert exp.config["description"] == "from the template"

    code, _, err = det.run("e", "create", str(config_file), str(context), "--template", "nope")
    assert code != 0 and "template 'nope' not found" in err
    for experiment_id in (exp_id, exp.id):
        sdk.get_experiment(experiment_id).kill()


def test_templates_follow_rbac_on_their_workspace(
    det: Det, module_master: Any, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A template lives in a workspace: outsiders do not see it (404, absent from the list, not
    usable by ``--template``), a Viewer sees it but cannot change it (403 naming the permission)."""
    admin = client.Client(module_master.session("admin"))
    workspace = admin.workspaces.create("tpl-ws")["workspace"]
    path = tmp_path / "tpl.yaml"
    path.write_text(yaml.safe_dump({"max_restarts": 5}))
    monkeypatch.setenv("DET_USER", "admin")
    det.ok("tpl", "create", "ws-tpl", str(path), "-w", "tpl-ws")
    assert admin.templates.get("ws-tpl")["template"]["workspaceId"] == workspace["id"]
    code, _, err = det.run("tpl", "create", "ws-none", str(path), "-w", "no-such-ws")
    assert code != 0 and "workspace 'no-such-ws' not found" in err

    user = client.Client(module_master.session("determined"))
    with pytest.raises(client.NotFoundError, match="template 'ws-tpl' not found"):
        user.templates.get("ws-tpl")
    assert "ws-tpl" not in [t["name"] for t in user.templates.list()["templates"]]
    with pytest.raises(client.NotFoundError, match="template: template 'ws-tpl' not found"):
        client.create_experiment(
            user.session, "entrypoint: python3 train.py\n", [], template="ws-tpl", activate=False
        )

    user_id = user.users.me()["user"]["id"]
    admin.rbac.assign(4, user_id=user_id, workspace_id=workspace["id"])  # Viewer
    assert user.templates.get("ws-tpl")["template"]["config"] == {"max_restarts": 5}
    with pytest.raises(client.ForbiddenError, match="PERMISSION_TYPE_UPDATE_TEMPLATES"):
        user.templates.set_config("ws-tpl", {})
    with pytest.raises(client.ForbiddenError, match="PERMISSION_TYPE_DELETE_TEMPLATES"):
        user.templates.delete("ws-tpl")
    assert admin.templates.get("ws-tpl")["template"]["config"] == {"max_restarts": 5}
    admin.workspaces.delete(workspace["id"])  # a workspace's templates go with it
    assert "ws-tpl" not in [t["name"] for t in admin.templates.list()["templates"]]


def test_templates_and_labels_on_each_database(master: Any, tmp_path: pathlib.Path) -> None:
    """The template and label queries on SQLite and PostgreSQL: substring filter, rename, merge on
    create, one-label changes, labels in use."""
    api = client.Client(master.session("admin"))
    api.templates.create("Db-Tpl_%", TEMPLATE)
    assert [t["name"] for t in api.templates.list({"name": "tpl_%"})["templates"]] == ["Db-Tpl_%"]
    assert api.templates.list({"name": "tplx"})["templates"] == []
    api.templates.rename("Db-Tpl_%", "db-tpl")
    context = tmp_path / "context"
    context.mkdir()
    (context / "train.py").write_text(TRIAL)
    config = "name: db\nentrypoint: python3 train.py\nsearcher: {name: single, max_length: 1}\n"
    created = client.create_experiment(
        api.session, config, context, template="db-tpl", activate=False
    )
    assert created.config["description"] == "from the template"
    assert api.experiments.add_label(created.id or 0, "a")["labels"] == ["a"]
    assert api.experiments.add_label(created.id or 0, "b")["labels"] == ["a", "b"]
    assert api.experiments.remove_label(created.id or 0, "a")["labels"] == ["b"]
    assert api.experiments.labels()["labels"] == ["b"]
    api.experiments.act(created.id or 0, "kill")
