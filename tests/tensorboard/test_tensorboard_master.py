"""TensorBoard on a real master: a PyTorch and a Keras experiment (the examples, a few batches and
epochs) write TensorBoard events to checkpoint storage; ``det tensorboard start`` on both serves
their metrics through the master's authenticated proxy; the web UI's button opens it.

One master and one pair of experiments (local ``shared_fs`` storage) for the module; the S3 variant
is ``test_tensorboard_s3.py``.
"""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
from typing import Any

import pytest
import requests
from cli.harness import Det
from e2e.harness import EXAMPLES
from tb_testing import URL_LINE, check_scalars, create_example_experiments, write_scalars

from determined.experimental import client as sdk
from determined.tensorboard import trial_storage_path

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
HERE = pathlib.Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def site(make_module_master: Any) -> Any:
    master = make_module_master()
    master.experiments = create_example_experiments(master.api())
    return master


@pytest.fixture
def det(site: Any, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> Det:
    for name in ("DET_USER", "DET_PASS", "DET_USER_TOKEN", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DET_MASTER", site.url)
    monkeypatch.setenv("DET_CONFIG_DIR", str(tmp_path / "det-config"))
    return Det(site.url, tmp_path / "det-config", capsys)


def test_start_both_experiments_serves_their_metrics_behind_auth(site: Any, det: Det) -> None:
    experiments = site.experiments
    out = det.ok("tensorboard", "start", str(experiments["pytorch"]), str(experiments["keras"]),
                 "--no-browser")  # fmt: skip
    url = URL_LINE.search(out).group(1)  # type: ignore[union-attr]
    tensorboard_id = re.search(r"id: ([0-9a-f-]+)", out).group(1)  # type: ignore[union-attr]
    assert url == f"{site.url}/proxy/{tensorboard_id}/"
    check_scalars(site.api(), url, site.login("determined"), experiments)

    listed = det.ok("tensorboard", "list")
    assert tensorboard_id in listed and "RUNNING" in listed
    assert det.ok("tensorboard", "list", "-q").split() == [tensorboard_id]
    config = det.ok("tensorboard", "config", tensorboard_id[:8])  # a unique prefix
    assert isinstance(config, str)
    assert "TensorBoard is serving" in det.ok("tensorboard", "logs", tensorboard_id)

    assert "to 10" in det.ok("tensorboard", "set", "priority", tensorboard_id, "10")
    assert site.api().get(f"/api/v1/tensorboards/{tensorboard_id}")["tensorboard"]["priority"] == 10
    code, _, err = det.run("tensorboard", "set", "priority", tensorboard_id, "100")
    assert code == 1 and "priority" in err
    assert "Killed tensorboard" in det.ok("tensorboard", "kill", tensorboard_id)
    api = site.api()
    api.wait_for(
        lambda: (
            api.get(f"/api/v1/tensorboards/{tensorboard_id}")["tensorboard"]["state"]
            == "STATE_TERMINATED"
        ),
        60,
        "the TensorBoard to end",
    )
    code, _, err = det.run("tensorboard", "open", tensorboard_id)
    assert code == 1 and "has ended" in err


def test_trial_ids_and_bad_requests(site: Any) -> None:
    api = site.api()
    (trial,) = api.trials(site.experiments["pytorch"])
    launched = api.post("/api/v1/tensorboards", {"trialIds": [trial["id"]]})["tensorboard"]
    assert launched["trialIds"] == [trial["id"]] and launched["experimentIds"] == []
    assert launched["serviceAddress"] == f"/proxy/{launched['id']}/"
    token = site.login("determined")
    api.wait_for(
        lambda: api.get(f"/api/v1/tensorboards/{launched['id']}")["tensorboard"]["isReady"],
        120,
        "the TensorBoard to be ready",
    )
    tags = requests.get(
        f"{site.url}/proxy/{launched['id']}/data/plugin/scalars/tags",
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    ).json()
    assert list(tags) == [f"trial_{trial['id']}"]
    api.post(f"/api/v1/tensorboards/{launched['id']}/kill")

    session = site.session("determined")
    for body, status, field in [
        ({}, 400, "experimentIds"),
        ({"experimentIds": "1"}, 400, "experimentIds"),
        ({"trialIds": [999999]}, 404, "trialIds"),
        ({"experimentIds": [999999]}, 404, "experimentIds"),
        ({"filters": {"states": ["NOPE"]}}, 400, "filters.states"),
        ({"filters": {"name": "no-experiment-has-this-name"}}, 400, "filters"),
        ({"experimentIds": [1], "config": {"resources": "big"}}, 400, "config.resources"),
        ({"experimentIds": [1], "config": {"tensorboard_args": "--x"}}, 400, "tensorboard_args"),
    ]:
        answer = requests.post(
            f"{site.url}/api/v1/tensorboards",
            json=body,
            headers={"Authorization": f"Bearer {session.token}"},
            timeout=30,
        )
        assert answer.status_code == status, (body, answer.text)
        assert field in answer.text, (body, answer.text)
    body = {"filters": {"name": "tb-keras"}, "config": {"idle_timeout": "1s"}}
    by_filter = api.post("/api/v1/tensorboards", body)["tensorboard"]
    assert by_filter["experimentIds"] == [site.experiments["keras"]]
    ended = api.wait_for(
        lambda: (
            (tb := api.get(f"/api/v1/tensorboards/{by_filter['id']}")["tensorboard"])["state"]
            == "STATE_TERMINATED"
            and tb
        ),
        120,
        "the idle TensorBoard to stop",
    )
    assert "idle timeout" in ended["exitStatus"]
    missing = requests.get(
        f"{site.url}/api/v1/tensorboards/not-a-tensorboard",
        headers={"Authorization": f"Bearer {session.token}"},
        timeout=30,
    )
    assert missing.status_code == 404


def test_delete_tensorboard_files(site: Any, tmp_path: pathlib.Path) -> None:
    api = site.api()
    exp_id = api.create_experiment(
        EXAMPLES / "pytorch" / "const.yaml", EXAMPLES / "pytorch", activate=False
    )
    storage = pathlib.Path(api.get(f"/api/v1/experiments/{exp_id}")["config"]
                           ["checkpoint_storage"]["host_path"])  # fmt: skip
    files = storage / trial_storage_path(exp_id, 1)
    files.mkdir(parents=True)
    write_scalars(files, "loss", [1.0])

    client = sdk.Determined(site.url, "determined", "")
    client.get_experiment(exp_id).delete_tensorboard_files()
    assert not (storage / "tensorboard" / "experiment" / str(exp_id)).exists()
    cluster_id = api.get("/api/v1/master")["clusterId"]  # trials upload under upstream's layout
    ran = site.experiments["pytorch"]
    assert (storage / cluster_id / "tensorboard" / "experiment" / str(ran)).is_dir()

    # someone else's experiment: refused
    admin = site.session("admin")
    admin.request("POST", "/api/v1/users", body={"user": {"username": "tb-stranger"}})
    stranger = site.session("tb-stranger")
    answer = requests.delete(
        f"{site.url}/api/v1/experiments/{exp_id}/tensorboard-files",
        headers={"Authorization": f"Bearer {stranger.token}"},
        timeout=30,
    )
    assert answer.status_code == 403


def test_web_ui_button_opens_tensorboard(site: Any, page: Any) -> None:
    exp_id = site.experiments["pytorch"]
    page.context.add_cookies([{"name": "auth", "value": site.login("admin"), "url": site.url}])
    page.set_default_timeout(120_000)
    page.goto(f"{site.url}/experiments/{exp_id}")
    with page.expect_popup() as popup_info:
        page.click("#open-tensorboard")
    popup = popup_info.value
    popup.wait_for_url(re.compile(r".*/proxy/[0-9a-f-]+/.*"))
    popup.wait_for_load_state()
    assert "TensorBoard" in popup.title()
    tensorboard_id = popup.url.split("/proxy/")[1].split("/")[0]
    # the proxied data behind the page is the experiment's
    tags = popup.evaluate(
        "async (id) => (await fetch(`/proxy/${id}/data/plugin/scalars/tags`)).json()",
        tensorboard_id,
    )
    (trial,) = site.api().trials(exp_id)
    assert "Determined/validation_loss" in tags[f"trial_{trial['id']}"]

    # the same experiment again: the running TensorBoard is reused
    with page.expect_popup() as again_info:
        page.click("#open-tensorboard")
    again = again_info.value
    again.wait_for_url(re.compile(r".*/proxy/[0-9a-f-]+/.*"))
    assert tensorboard_id in again.url

    # a selection of trials
    page.check(f".trial-select[value='{trial['id']}']")
    with page.expect_popup() as selected_info:
        page.click("#tensorboard-selected")
    selected = selected_info.value
    selected.wait_for_url(re.compile(r".*/proxy/[0-9a-f-]+/.*"))
    assert tensorboard_id not in selected.url
    listed = site.api().get("/api/v1/tensorboards", users="admin")["tensorboards"]
    assert sorted(tb["trialIds"] for tb in listed) == [[], [trial["id"]]]

    # the trial's own page: the TensorBoard of that one trial, reused
    selected_id = selected.url.split("/proxy/")[1].split("/")[0]
    page.goto(f"{site.url}/trials/{trial['id']}")
    with page.expect_popup() as trial_info:
        page.click("#open-tensorboard")
    trial_page = trial_info.value
    trial_page.wait_for_url(re.compile(r".*/proxy/[0-9a-f-]+/.*"))
    assert selected_id in trial_page.url


def test_upstream_cli_starts_and_opens_a_tensorboard(site: Any, tmp_path: pathlib.Path) -> None:
    """Upstream's own ``det tensorboard start`` (determined==0.38.1, its own venv) against det: the
    URL it prints (upstream's web UI page ``/det/interactive/...``) leads to the proxied TensorBoard."""
    from e2e.test_upstream_client import _upstream_python

    det_script = _upstream_python().parent / "det"
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "DET_"))
    }
    env.update({"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "config"),
                "DET_MASTER": site.url, "DET_USER": "determined", "DET_PASS": ""})  # fmt: skip
    result = subprocess.run(
        [str(det_script), "tensorboard", "start", str(site.experiments["keras"]), "--no-browser"],
        capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    url = URL_LINE.search(result.stdout).group(1)  # type: ignore[union-attr]
    assert "/det/interactive/" in url
    token = site.login("determined")
    page = requests.get(url, headers={"Authorization": f"Bearer {token}"}, timeout=30)
    assert page.status_code == 200 and "TensorBoard" in page.text
    tensorboard_id = page.url.split("/proxy/")[1].split("/")[0]
    # (upstream's `det tensorboard list` asks for /api/v1/workspaces, which det does not serve)
    killed = subprocess.run(
        [str(det_script), "tensorboard", "kill", tensorboard_id],
        capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert killed.returncode == 0, killed.stdout + killed.stderr


def test_a_running_trial_shows_up_and_grows(site: Any) -> None:
    """A Core API trial still running (no checkpoint yet): its scalars reach TensorBoard while it
    runs, and keep growing (det uploads after metric reports; the task syncs new bytes)."""
    api = site.api()
    exp_id = api.create_experiment(
        {"name": "tb-live", "entrypoint": "python3 live_scalars.py", "max_restarts": 0,
         "searcher": {"name": "single", "metric": "live", "max_length": 1000000}},
        HERE / "trials" / "live",
    )  # fmt: skip
    try:
        launched = api.post("/api/v1/tensorboards", {"experimentIds": [exp_id]})["tensorboard"]
        url = f"{site.url}/proxy/{launched['id']}/"
        auth = {"Authorization": f"Bearer {site.login('determined')}"}

        def points() -> int:
            answer = requests.get(url + "data/plugin/scalars/tags", headers=auth, timeout=30)
            if answer.status_code != 200:
                return 0
            runs = [run for run, tags in answer.json().items() if "live" in tags]
            if not runs:
                return 0
            series = requests.get(
                url + "data/plugin/scalars/scalars",
                params={"run": runs[0], "tag": "live"},
                headers=auth,
                timeout=30,
            ).json()
            return len(series)

        first = api.wait_for(points, 180, "the running trial's scalars")
        api.wait_for(lambda: points() > first, 120, "more scalars of the running trial")
        assert api.experiment(exp_id)["state"] == "STATE_RUNNING"  # ACTIVE, its trial running
        api.post(f"/api/v1/tensorboards/{launched['id']}/kill")
    finally:
        api.post(f"/api/v1/experiments/{exp_id}/kill")
