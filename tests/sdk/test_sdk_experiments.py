"""Experiments and trials through the SDK: create (from ``examples/`` too), wait, list, edit,
pause/activate/kill, archive, delete."""

from __future__ import annotations

import pathlib
import tarfile

import pytest
import yaml
from sdk.harness import TRIALS, WAIT_S, poll, trial_config, trial_logs

from determined.client import APIError, NotFoundError
from determined.experimental import (
    ExperimentSortBy,
    ExperimentState,
    OrderBy,
    TrialSortBy,
    TrialState,
    client,
)
from determined.master import Master

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "core_api"


def test_example_experiment_end_to_end(master: Master, tmp_path: pathlib.Path) -> None:
    """The round trip of the issue: create from examples/, wait, trials, checkpoints, download,
    register as a model version, stream metrics."""
    client.login(master.url, "determined", "")
    exp = client.create_experiment(str(EXAMPLES / "2_checkpoints.yaml"), str(EXAMPLES))
    # Upstream's enrichment: an active experiment reads QUEUED/STARTING/RUNNING from its trials.
    assert exp.state in (
        ExperimentState.ACTIVE,
        ExperimentState.QUEUED,
        ExperimentState.STARTING,
        ExperimentState.RUNNING,
    )
    assert exp.wait(interval=0.1, timeout=WAIT_S) == ExperimentState.COMPLETED, trial_logs(exp)
    (trial,) = exp.list_trials()
    assert trial.state == TrialState.COMPLETED and trial.experiment_id == exp.id
    best = exp.list_checkpoints(max_results=1)[0]
    assert best.training is not None and best.training.trial_id == trial.id
    path = pathlib.Path(best.download(str(tmp_path / "ckpt")))
    assert (path / "model.json").exists() and (path / "metadata.json").exists()
    model = client.create_model("example-model")
    version = model.register_version(best.uuid)
    assert version.checkpoint is not None and version.checkpoint.uuid == best.uuid
    training = list(client.iter_trials_metrics([trial.id], group="training"))
    assert [m.steps_completed for m in training] == list(range(10, 101, 10))
    (validation,) = trial.iter_metrics("validation")
    assert "validation_loss" in validation.metrics


def test_create_get_list_and_edit(master: Master, tmp_path: pathlib.Path) -> None:
    sdk = client.Determined(master.url, "determined", "")
    config_file = tmp_path / "exp.yaml"
    config_file.write_text(yaml.safe_dump(trial_config(name="from-file", labels=["x"])))
    extra = tmp_path / "extra.txt"
    extra.write_text("included")
    first = sdk.create_experiment(config_file, TRIALS, includes=[extra], activate=False)
    assert first.state == ExperimentState.PAUSED and first.name == "from-file"
    second = sdk.create_experiment(
        trial_config(name="from-dict"), str(TRIALS), parent_id=first.id, project_id=1
    )
    assert second.project_id == 1 and second.workspace_id == 1

    code = pathlib.Path(first.download_code(str(tmp_path / "code")))
    with tarfile.open(code) as archive:
        names = archive.getnames()
    assert "sdk_trial.py" in names and "extra.txt" in names

    got = sdk.get_experiment(second.id)
    assert got.config is not None and got.config["name"] == "from-dict"
    mine = {e.id for e in sdk.list_experiments(experiment_ids=[first.id, second.id])}
    assert mine == {first.id, second.id}
    paused = sdk.list_experiments(
        experiment_ids=[first.id, second.id], states=[ExperimentState.PAUSED]
    )
    assert [e.id for e in paused] == [first.id]
    assert [e.id for e in sdk.list_experiments(labels=["x"], experiment_ids=[first.id])] == [
        first.id
    ]
    assert {e.id for e in sdk.list_experiments(name="from-", users=["determined"])} >= mine
    assert sdk.list_experiments(users=["admin"], experiment_ids=[first.id]) == []
    newest = sdk.list_experiments(
        sort_by=ExperimentSortBy.ID, order_by=OrderBy.DESC, experiment_ids=[first.id, second.id]
    )
    assert [e.id for e in newest] == [second.id, first.id]
    with pytest.raises(ValueError, match="sort_by"):
        sdk.list_experiments(sort_by="SIDEWAYS")  # type: ignore[arg-type]

    first.set_name("renamed")
    first.set_description("about it")
    first.set_notes("some notes")
    first.set_labels({"a", "b"})
    first.add_label("c")
    first.remove_label("a")
    first.reload()
    assert (first.name, first.description, first.notes) == ("renamed", "about it", "some notes")
    assert first.labels == {"b", "c"}

    with pytest.raises(APIError, match="template 't' not found") as missing:
        sdk.create_experiment(trial_config(), TRIALS, template="t")
    assert missing.value.status == 404
    with pytest.raises(ValueError, match="cannot read"):
        sdk.create_experiment(str(tmp_path / "missing.yaml"), TRIALS)
    with pytest.raises(APIError, match="searcher") as bad:
        sdk.create_experiment(trial_config(searcher={"name": "sideways"}), TRIALS)
    assert bad.value.status == 400
    first.kill()
    second.kill()
    assert first.wait(interval=0.05, timeout=WAIT_S) == ExperimentState.CANCELED
    second.wait(interval=0.05, timeout=WAIT_S)


def test_pause_activate_kill(master: Master) -> None:
    client.login(master.url, "determined", "")
    exp = client.create_experiment(
        trial_config(hyperparameters={"steps": 200, "step_seconds": 0.05}), TRIALS
    )
    trial = exp.await_first_trial(interval=0.05)
    poll(lambda: "step 2 done" in "".join(trial.iter_logs()), "the trial to run")
    exp.pause()
    poll(lambda: (exp.reload(), exp.state == ExperimentState.PAUSED)[1], "PAUSED")
    trial.reload()
    poll(lambda: "preempted" in "".join(trial.iter_logs()), "the trial to stop")
    with pytest.raises(ValueError, match="paused"):
        exp.wait(interval=0.05)
    exp.activate()
    poll(lambda: "resumed from" in "".join(trial.iter_logs()), "the trial to resume")
    exp.kill()
    assert exp.wait(interval=0.05, timeout=WAIT_S) == ExperimentState.CANCELED
    trial.reload()
    assert trial.state == TrialState.CANCELED
    assert trial.get_experiment().id == exp.id


def test_cancel_trial_kill_and_wait_timeout(master: Master) -> None:
    client.login(master.url, "determined", "")
    exp = client.create_experiment(
        trial_config(hyperparameters={"steps": 200, "step_seconds": 0.05}), TRIALS
    )
    with pytest.raises(TimeoutError, match=f"experiment {exp.id}"):
        exp.wait(interval=0.05, timeout=0.2)
    trial = exp.await_first_trial(interval=0.05)
    trial.kill()
    poll(lambda: (trial.reload(), trial.state == TrialState.CANCELED)[1], "the killed trial")
    exp.cancel()
    assert exp.wait(interval=0.05, timeout=WAIT_S) in (
        ExperimentState.CANCELED,
        ExperimentState.COMPLETED,
    )


def test_trials_sorting_archive_and_delete(master: Master) -> None:
    client.login(master.url, "determined", "")
    exp = client.create_experiment(
        trial_config(
            searcher={"name": "grid", "metric": "val_loss", "max_length": 2},
            hyperparameters={
                "steps": 2,
                "last_loss": {"type": "categorical", "vals": [0.1, 0.9, 0.5]},
            },
        ),
        TRIALS,
    )
    with pytest.raises(APIError, match="terminal"):
        exp.archive()
    assert exp.wait(interval=0.05, timeout=WAIT_S) == ExperimentState.COMPLETED
    trials = exp.list_trials()
    assert [t.id for t in trials] == sorted(t.id for t in trials) and len(trials) == 3
    by_best = exp.list_trials(TrialSortBy.BEST_VALIDATION_METRIC, OrderBy.ASC)
    assert [t.hparams["last_loss"] for t in by_best] == [0.1, 0.5, 0.9]
    latest_desc = exp.list_trials(TrialSortBy.LATEST_VALIDATION_METRIC, OrderBy.DESC)
    assert [t.hparams["last_loss"] for t in latest_desc] == [0.9, 0.5, 0.1]
    with pytest.warns(FutureWarning, match="list_trials"):
        assert [t.id for t in exp.get_trials()] == [t.id for t in trials]
    assert len(list(exp.iter_trials(limit=1))) == 3

    exp.archive()
    assert exp.archived
    assert exp.id in {e.id for e in client.list_experiments(experiment_ids=[exp.id])}
    exp.unarchive()
    exp.reload()
    assert exp.archived is False
    client.Determined(master.url, "admin", "").create_user(
        "not-owner", admin=False, password="Secret123"
    )
    stranger = client.Determined(master.url, "not-owner", "Secret123")
    with pytest.raises(APIError, match="owner or an admin") as forbidden:
        stranger.get_experiment(exp.id).delete()
    assert forbidden.value.status == 403
    exp.delete()
    with pytest.raises(NotFoundError):
        client.get_experiment(exp.id)
