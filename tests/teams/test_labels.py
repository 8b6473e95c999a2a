"""Experiment labels one at a time (upstream's PUT/DELETE label routes), every label in use
(``GET /experiment/labels``), through the SDK, ``det e label`` and the REST client."""

from __future__ import annotations

import concurrent.futures
import pathlib
from typing import Any

import pytest
from cli.harness import TRIAL, Det, experiment_config

from determined import client
from determined.experimental import Determined, Experiment


@pytest.fixture(scope="module")
def sdk(module_master: Any) -> Determined:
    return Determined._from_session(module_master.session("determined"))


@pytest.fixture(scope="module")
def context(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    path = tmp_path_factory.mktemp("context")
    (path / "train.py").write_text(TRIAL)
    return path


def _paused(sdk: Determined, context: pathlib.Path, **overrides: Any) -> Experiment:
    return sdk.create_experiment(experiment_config(**overrides), context, activate=False)


def test_sdk_add_and_remove_label(sdk: Determined, context: pathlib.Path) -> None:
    exp = _paused(sdk, context, labels=["seed"])
    exp.add_label("x")
    assert exp.labels == {"seed", "x"}
    exp.add_label("x")  # a no-op when present
    exp.remove_label("seed")
    exp.remove_label("absent")  # a no-op when absent
    assert exp.labels == {"x"}
    exp.reload()
    assert exp.labels == {"x"} and exp.config is not None and exp.config["labels"] == ["x"]
    exp.kill()


def test_concurrent_adds_all_stay(sdk: Determined, context: pathlib.Path) -> None:
    """Each PUT changes one label in one transaction: none of 8 parallel adds is lost."""
    exp = _paused(sdk, context)
    api = client.Client(sdk._session).experiments
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: api.add_label(exp.id, f"l{i}"), range(8)))
    exp.reload()
    assert exp.labels == {f"l{i}" for i in range(8)}
    exp.kill()


def test_labels_in_use_most_used_first_and_by_project(
    sdk: Determined, context: pathlib.Path
) -> None:
    api = client.Client(sdk._session).experiments
    exps = [_paused(sdk, context, labels=labels) for labels in (["common", "rare"], ["common"])]
    labels = api.labels()["labels"]
    assert labels.index("common") < labels.index("rare")
    assert api.labels(project_id=1)["labels"] == labels
    assert api.labels(project_id=987654)["labels"] == []
    for exp in exps:
        exp.kill()


def test_bad_label_requests_name_the_problem(sdk: Determined, context: pathlib.Path) -> None:
    api = client.Client(sdk._session).experiments
    with pytest.raises(client.NotFoundError, match="experiment 987654 not found"):
        api.add_label(987654, "x")
    exp = _paused(sdk, context)
    with pytest.raises(client.APIError, match="label: must not be empty") as e:
        api.add_label(exp.id, " ")
    assert e.value.status == 400
    exp.kill()


def test_det_experiment_label_add_remove(
    sdk: Determined,
    context: pathlib.Path,
    module_master: Any,
    tmp_path: pathlib.Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name in ("DET_USER_TOKEN", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DET_MASTER", module_master.url)
    monkeypatch.setenv("DET_CONFIG_DIR", str(tmp_path))
    monkeypatch.setenv("DET_USER", "determined")
    monkeypatch.setenv("DET_PASS", "")
    det = Det(module_master.url, tmp_path, capsys)
    exp = _paused(sdk, context)
    out = det.ok("e", "label", "add", str(exp.id), "nice")
    assert out.strip() == f"Added label 'nice' to experiment {exp.id}"
    det.ok("experiment", "label", "add", str(exp.id), "other")
    det.ok("e", "label", "remove", str(exp.id), "nice")
    exp.reload()
    assert exp.labels == {"other"}
    exp.kill()


def test_labels_follow_rbac(module_master: Any, context: pathlib.Path) -> None:
    """An outsider cannot label another workspace's experiment (404) nor see its labels in
    ``GET /experiment/labels``; a Viewer there gets 403 naming the permission, nothing changes."""
    admin = client.Client(module_master.session("admin"))
    workspace = admin.workspaces.create("labels-ws")["workspace"]
    project = admin.projects.create(workspace["id"], "labels-proj")["project"]
    admin_sdk = Determined._from_session(admin.session)
    exp = admin_sdk.create_experiment(
        experiment_config(labels=["secret-label"]),
        context,
        project_id=project["id"],
        activate=False,
    )
    user = client.Client(module_master.session("determined"))
    with pytest.raises(client.NotFoundError, match=f"experiment {exp.id} not found"):
        user.experiments.add_label(exp.id, "mine")
    assert "secret-label" not in user.experiments.labels()["labels"]
    assert "secret-label" in admin.experiments.labels()["labels"]

    admin.rbac.assign(4, user_id=user.users.me()["user"]["id"], workspace_id=workspace["id"])
    assert "secret-label" in user.experiments.labels()["labels"]
    with pytest.raises(client.ForbiddenError, match="PERMISSION_TYPE_UPDATE_EXPERIMENT_METADATA"):
        user.experiments.remove_label(exp.id, "secret-label")
    exp.reload()
    assert exp.labels == {"secret-label"}
    exp.kill()
