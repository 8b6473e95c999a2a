"""Upstream's own client (determined==0.38.1, its own venv under .cache/, built once by
tests/e2e/test_upstream_client.py) against det-master: workspaces, projects, an experiment in a
project, moving it, labelling it, listing both, config templates — through upstream's SDK and its
``det`` CLI, with upstream's exact call shapes."""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import textwrap
from typing import Any

import pytest
import yaml
from e2e.harness import EXAMPLES
from e2e.test_upstream_client import _upstream_python

from determined import client

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

CONTEXT = EXAMPLES / "core_api"
CONFIG = CONTEXT / "1_metrics.yaml"

SDK_SCRIPT = textwrap.dedent(
    """
    import json, sys, warnings
    warnings.simplefilter("ignore", FutureWarning)
    from determined.experimental import client

    master, config, context = sys.argv[1], sys.argv[2], sys.argv[3]
    client.login(master=master, user="admin", password="")
    ws = client.create_workspace("up-ws")
    first = ws.create_project("up-first", description="made by upstream's SDK")
    second = ws.create_project("up-second")
    exp = client.create_experiment(config=config, model_dir=context, project_id=first.id)
    created_in = exp.project_id
    exp.move_to_project("up-ws", "up-second")
    exp.add_label("x")
    exp.add_label("y")
    exp.remove_label("y")
    labels = sorted(exp.labels)
    exp.reload()
    gone = client.create_workspace("up-gone")
    client.delete_workspace("up-gone")
    print(json.dumps({
        "workspace": [ws.id, ws.name, client.get_workspace("up-ws").id],
        "workspaces": [w.name for w in client.list_workspaces()],
        "projects": sorted(p.name for p in ws.list_projects()),
        "project_ids": [first.id, second.id, ws.get_project("up-second").id],
        "experiment": exp.id,
        "created_in": created_in,
        "moved_to": [exp.project_id, exp.workspace_id],
        "labels": labels,
        "reloaded_labels": sorted(exp.labels or []),
        "in_first": [e.id for e in first.list_experiments()],
        "in_second": [e.id for e in second.list_experiments()],
    }))
    exp.kill()
    """
)


def _clean_env(home: pathlib.Path, master_url: str) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "DET_"))
    }
    env.update({"HOME": str(home), "XDG_CONFIG_HOME": str(home / "config")})
    env.update({"DET_MASTER": master_url, "DET_USER": "admin", "DET_PASS": ""})
    return env


@pytest.fixture(scope="module")
def upstream_python() -> pathlib.Path:
    return _upstream_python()


def test_upstream_sdk_workspaces_projects_move_label_list(
    upstream_python: pathlib.Path, module_master: Any, tmp_path: pathlib.Path
) -> None:
    result = subprocess.run(
        [str(upstream_python), "-c", SDK_SCRIPT, module_master.url, str(CONFIG), str(CONTEXT)],
        capture_output=True, text=True, env=_clean_env(tmp_path, module_master.url),
        timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    ws_id, ws_name, looked_up = report["workspace"]
    assert ws_name == "up-ws" and looked_up == ws_id
    assert "up-ws" in report["workspaces"] and "up-gone" not in report["workspaces"]
    assert report["projects"] == ["up-first", "up-second"]
    first_id, second_id, looked_up_second = report["project_ids"]
    assert looked_up_second == second_id
    assert report["created_in"] == first_id
    assert report["moved_to"] == [second_id, ws_id]
    assert report["labels"] == ["x"] and report["reloaded_labels"] == ["x"]
    assert report["experiment"] in report["in_second"]
    assert report["experiment"] not in report["in_first"]
    # what det's own client sees
    seen = client.Client(module_master.session("admin")).experiments.get(report["experiment"])
    assert seen["experiment"]["projectId"] == second_id
    assert seen["experiment"]["labels"] == ["x"]


class UpstreamDet:
    """Upstream's ``det`` script, run as a subprocess against one master."""

    def __init__(self, python: pathlib.Path, home: pathlib.Path, master_url: str) -> None:
        self.script = python.parent / "det"
        self.home = home
        self.env = _clean_env(home, master_url)

    def __call__(self, *argv: str) -> str:
        result = subprocess.run(
            [str(self.script), *argv], capture_output=True, text=True, env=self.env,
            timeout=300, cwd=self.home,
        )  # fmt: skip
        assert result.returncode == 0, f"det {' '.join(argv)}:\n{result.stdout}{result.stderr}"
        return result.stdout


def _project_ids(session: client.Session, workspace: str) -> dict[str, int]:
    """Project name -> id in a workspace, asked on upstream's REST paths."""
    [ws] = session.request("GET", "/api/v1/workspaces", params={"name": workspace})["workspaces"]
    answer = session.request("GET", f"/api/v1/workspaces/{ws['id']}/projects")
    return {p["name"]: p["id"] for p in answer["projects"]}


def _created_id(out: str) -> int:
    match = re.search(r"Created experiment (\d+)", out)
    assert match, out
    return int(match.group(1))


def test_upstream_cli_workspaces_projects_move_label_list(
    upstream_python: pathlib.Path, module_master: Any, tmp_path: pathlib.Path
) -> None:
    det = UpstreamDet(upstream_python, tmp_path, module_master.url)
    det("workspace", "create", "cli-ws")
    det("project", "create", "cli-ws", "cli-first")
    det("project", "create", "cli-ws", "cli-second", "--description", "second")
    api = client.Client(module_master.session("admin"))
    projects = _project_ids(api.session, "cli-ws")
    out = det(
        "e", "create", str(CONFIG), str(CONTEXT), "--project_id", str(projects["cli-first"]),
        "--paused",
    )  # fmt: skip
    exp_id = _created_id(out)
    assert api.experiments.get(exp_id)["experiment"]["projectId"] == projects["cli-first"]

    det("e", "move", str(exp_id), "cli-ws", "cli-second")
    det("e", "label", "add", str(exp_id), "nice")
    det("e", "label", "add", str(exp_id), "gone")
    det("e", "label", "remove", str(exp_id), "gone")
    seen = api.experiments.get(exp_id)["experiment"]
    assert seen["projectId"] == projects["cli-second"] and seen["labels"] == ["nice"]

    assert "cli-ws" in det("workspace", "list")
    listed = det("workspace", "list-projects", "cli-ws")
    assert "cli-first" in listed and "cli-second" in listed
    assert re.search(
        rf"^\s*{exp_id}\s", det("project", "list-experiments", "cli-ws", "cli-second"), re.M
    )
    assert not re.search(
        rf"^\s*{exp_id}\s", det("project", "list-experiments", "cli-ws", "cli-first"), re.M
    )
    api.experiments.act(exp_id, "kill")


def test_upstream_cli_templates(
    upstream_python: pathlib.Path, module_master: Any, tmp_path: pathlib.Path
) -> None:
    det = UpstreamDet(upstream_python, tmp_path, module_master.url)
    template = tmp_path / "tpl.yaml"
    template.write_text(
        yaml.safe_dump({"description": "from upstream's template", "max_restarts": 2})
    )
    det("template", "set", "up-tpl", str(template))
    listing = det("tpl", "list")
    assert "up-tpl" in listing and "Uncategorized" in listing
    assert yaml.safe_load(det("tpl", "describe", "up-tpl"))["max_restarts"] == 2
    template.write_text(
        yaml.safe_dump({"description": "from upstream's template", "max_restarts": 1})
    )
    det("tpl", "set", "up-tpl", str(template))  # exists now: upstream GETs, then PATCHes
    assert yaml.safe_load(det("tpl", "describe", "up-tpl"))["max_restarts"] == 1

    exp_id = _created_id(
        det("e", "create", str(CONFIG), str(CONTEXT), "--template", "up-tpl", "--paused")
    )
    config = client.Client(module_master.session("admin")).experiments.get(exp_id)["config"]
    assert config["description"] == "from upstream's template"
    assert config["max_restarts"] == 0  # the experiment's own value wins
    det("tpl", "remove", "up-tpl")
    assert "up-tpl" not in det("tpl", "list")
    client.Client(module_master.session("admin")).experiments.act(exp_id, "kill")
