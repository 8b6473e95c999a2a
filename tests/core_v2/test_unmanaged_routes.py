"""The master's unmanaged-run routes through det's typed client: upstream's JSON shapes, external
ids, run starts, state patches, and that the master never schedules or recovers such runs; on
SQLite and on PostgreSQL (the root conftest's ``master``)."""

from __future__ import annotations

import pathlib
import uuid
from typing import Any

import pytest
import yaml

from determined.client import APIError, Client, MasterClient

CONFIG: dict[str, Any] = {
    "name": "unmanaged-routes",
    "searcher": {"name": "single", "metric": "loss"},
}


@pytest.fixture(autouse=True)
def storage(tmp_path: pathlib.Path) -> None:
    """Checkpoint storage of the test's experiments: a directory of its own."""
    CONFIG["checkpoint_storage"] = {"type": "shared_fs", "host_path": str(tmp_path / "ckpts")}


@pytest.fixture
def client(master: Any) -> Client:
    return Client(master.session("determined"))


def _config(**changes: Any) -> str:
    return yaml.safe_dump({**CONFIG, **changes})


def test_put_experiment_by_external_id_is_idempotent(client: Client) -> None:
    external = f"ext-{uuid.uuid4().hex[:6]}"
    first = client.experiments.put_unmanaged(external, _config())
    again = client.experiments.put_unmanaged(external, _config(description="second"))
    assert set(first) == {"experiment", "config"}
    exp = again["experiment"]
    assert exp["id"] == first["experiment"]["id"]
    assert exp["unmanaged"] is True
    assert exp["externalExperimentId"] == external
    assert exp["state"] == "STATE_PAUSED"  # no trial runs yet
    assert again["config"]["description"] == "second"  # upstream's upsert replaces the config
    other = client.experiments.create_unmanaged(_config())
    assert other["experiment"]["id"] != exp["id"]
    assert other["experiment"]["unmanaged"] is True


def test_trials_start_patch_and_experiment_state(client: Client) -> None:
    exp_id = client.experiments.create_unmanaged(_config())["experiment"]["id"]
    trial = client.trials.create_unmanaged(exp_id, {"lr": 0.1})["trial"]
    assert trial["state"] == "STATE_PAUSED"
    assert trial["hparams"] == {"lr": 0.1}
    assert trial["taskId"].startswith(f"{exp_id}.")

    started = client.trials.start_unmanaged(trial["id"], resume=False)
    assert started == {"trialRunId": 1, "stepsCompleted": 0}
    with pytest.raises(APIError, match="already been started"):
        client.trials.start_unmanaged(trial["id"], resume=False)
    assert client.experiments.get(exp_id)["experiment"]["state"] == "STATE_RUNNING"

    patched = client.trials.patch_unmanaged(trial["id"])  # a heartbeat keeps the state
    assert patched["trial"]["state"] == "STATE_RUNNING"
    done = client.trials.patch_unmanaged(trial["id"], "STATE_COMPLETED")["trial"]
    assert done["state"] == "STATE_COMPLETED" and done["endTime"]
    exp = client.experiments.get(exp_id)["experiment"]
    assert exp["state"] == "STATE_COMPLETED" and exp["endTime"]

    # A second run of the trial resumes from its latest checkpoint.
    task = MasterClient(client.session)
    task.start_run(trial["id"], None)
    task.report_checkpoint(
        "b6c1d0a4-0000-4000-8000-000000000001",
        task_id=trial["taskId"],
        allocation_id=None,
        resources={"state": 3},
        metadata={"steps_completed": 7},
    )
    again = client.trials.start_unmanaged(trial["id"])
    assert again == {
        "trialRunId": 2,
        "stepsCompleted": 7,
        "latestCheckpoint": "b6c1d0a4-0000-4000-8000-000000000001",
    }
    exp = client.experiments.get(exp_id)["experiment"]
    assert exp["state"] == "STATE_RUNNING" and exp["endTime"] is None


def test_put_trial_finds_the_trial_by_external_id(client: Client) -> None:
    exp_id = client.experiments.put_unmanaged(f"e-{uuid.uuid4().hex[:6]}", _config())["experiment"][
        "id"
    ]
    first = client.trials.put_unmanaged(exp_id, "trial-a", {"hp": 1})["trial"]
    again = client.trials.put_unmanaged(exp_id, "trial-a", {"hp": 2})["trial"]
    other = client.trials.put_unmanaged(exp_id, "trial-b", {"hp": 3})["trial"]
    assert again["id"] == first["id"] and again["hparams"] == {"hp": 2}
    assert first["taskId"] == f"{exp_id}.trial-a"
    assert other["id"] != first["id"]
    client.trials.start_unmanaged(first["id"])
    client.trials.patch_unmanaged(first["id"], "STATE_ERROR")
    client.trials.start_unmanaged(other["id"])
    client.trials.patch_unmanaged(other["id"], "STATE_COMPLETED")
    # COMPLETED outranks ERROR (upstream's order: PAUSED < ERROR < COMPLETED < RUNNING).
    assert client.experiments.get(exp_id)["experiment"]["state"] == "STATE_COMPLETED"


def test_unmanaged_routes_refuse_managed_records(client: Client, master: Any) -> None:
    with pytest.raises(APIError, match="unmanaged"):
        client.session.request(
            "PUT",
            "/api/v1/experiments/by-external-id/x",
            body={"config": _config(), "unmanaged": False},
        )
    exp_id = client.experiments.create_unmanaged(_config())["experiment"]["id"]
    with pytest.raises(APIError, match="only unmanaged trials"):
        client.session.request("POST", "/api/v1/trials", body={"experimentId": exp_id})
    trial_id = client.trials.create_unmanaged(exp_id)["trial"]["id"]
    with pytest.raises(APIError, match="unknown trial state"):
        client.trials.patch_unmanaged(trial_id, "STATE_DANCING")
    for action in ("pause", "activate"):
        with pytest.raises(APIError, match="unmanaged"):
            client.experiments.act(exp_id, action, retry=False)


def test_kill_and_restart_leave_unmanaged_runs_alone(master: Any) -> None:
    client = Client(master.session("determined"))
    exp_id = client.experiments.create_unmanaged(_config())["experiment"]["id"]
    trial_id = client.trials.create_unmanaged(exp_id)["trial"]["id"]
    client.trials.start_unmanaged(trial_id)
    master.restart()
    client = Client(master.session("determined"))
    # Nothing was scheduled and the experiment was not "resumed": it still runs, in its process.
    assert client.experiments.get(exp_id)["experiment"]["state"] == "STATE_RUNNING"
    assert client.trials.get(trial_id)["trial"]["state"] == "STATE_RUNNING"
    client.experiments.act(exp_id, "kill")
    exp = client.experiments.get(exp_id)["experiment"]
    assert exp["state"] == "STATE_CANCELED"
    assert client.trials.get(trial_id)["trial"]["state"] == "STATE_CANCELED"


def test_custom_searcher_section_is_kept_for_unmanaged_searches(client: Client) -> None:
    searcher = {"name": "custom", "metric": "loss", "smaller_is_better": True}
    answer = client.experiments.put_unmanaged("ray-search-1", _config(searcher=searcher))
    assert answer["config"]["searcher"] == searcher
    assert answer["experiment"]["searcherType"] == "custom"


def test_web_ui_shows_unmanaged_experiments(client: Client, master: Any) -> None:
    import requests

    config = _config(name="unmanaged-in-the-ui")
    exp_id = client.experiments.create_unmanaged(config)["experiment"]["id"]
    trial_id = client.trials.create_unmanaged(exp_id, {"lr": 0.5})["trial"]["id"]
    client.trials.start_unmanaged(trial_id)
    MasterClient(client.session).report_trial_metrics(
        trial_id, 1, "validation", {"loss": 0.25}, steps_completed=3
    )
    web = requests.Session()
    web.cookies.set("auth", str(client.session.token))
    for path in (
        "/experiments",
        "/ui/partials/experiments",
        f"/experiments/{exp_id}",
        f"/ui/partials/experiments/{exp_id}",
        f"/trials/{trial_id}",
        f"/ui/partials/trials/{trial_id}",
    ):
        page = web.get(str(master.url) + path, timeout=30)
        assert page.status_code == 200, (path, page.text[:500])
    listing = web.get(str(master.url) + "/ui/partials/experiments", timeout=30).text
    assert "unmanaged-in-the-ui" in listing


def test_trials_without_a_heartbeat_are_marked_error(client: Client, master: Any) -> None:
    import datetime

    from determined.master.db import Run, utcnow

    exp_id = client.experiments.create_unmanaged(_config())["experiment"]["id"]
    silent = client.trials.create_unmanaged(exp_id)["trial"]["id"]
    alive = client.trials.create_unmanaged(exp_id)["trial"]["id"]
    for trial_id in (silent, alive):
        client.trials.start_unmanaged(trial_id)
    with master.db.write() as session:
        session.get(Run, silent).last_activity = utcnow() - datetime.timedelta(minutes=6)
    assert master.manager.unmanaged.mark_lost_trials() == [silent]
    assert client.trials.get(silent)["trial"]["state"] == "STATE_ERROR"
    assert client.trials.get(alive)["trial"]["state"] == "STATE_RUNNING"
    assert client.experiments.get(exp_id)["experiment"]["state"] == "STATE_RUNNING"
    client.trials.patch_unmanaged(alive, "STATE_COMPLETED")
    assert client.experiments.get(exp_id)["experiment"]["state"] == "STATE_COMPLETED"
