"""Checkpoints, metrics and logs through the SDK, on a finished experiment of ``sdk_trial.py``
(validation losses 0.5, 0.2, 0.9 at steps 1, 2, 3; a checkpoint at every step)."""

from __future__ import annotations

import json
import pathlib
import threading
from typing import Any

import pytest
from sdk.harness import TRIALS, WAIT_S, trial_config

from determined.client import APIError
from determined.experimental import (
    Checkpoint,
    CheckpointSortBy,
    CheckpointState,
    Determined,
    DownloadMode,
    ExperimentState,
    OrderBy,
    client,
)
from determined.experimental.checkpoint import CheckpointStateException
from determined.master import Master


def steps(checkpoints: list[Checkpoint]) -> list[int]:
    return [int((c.metadata or {})["steps_completed"]) for c in checkpoints]


def test_list_checkpoints_sorting(finished: Any) -> None:
    assert steps(finished.list_checkpoints()) == [2, 1, 3]  # best searcher metric first
    assert steps(finished.list_checkpoints("val_loss", OrderBy.DESC)) == [3, 1, 2]
    assert steps(finished.list_checkpoints(CheckpointSortBy.BATCH_NUMBER, OrderBy.ASC)) == [1, 2, 3]
    assert steps(
        finished.list_checkpoints(CheckpointSortBy.BATCH_NUMBER, OrderBy.DESC, max_results=2)
    ) == [3, 2]
    by_uuid = finished.list_checkpoints(CheckpointSortBy.UUID, OrderBy.ASC)
    assert [c.uuid for c in by_uuid] == sorted(c.uuid for c in by_uuid)
    with pytest.raises(ValueError, match="sort_by and order_by"):
        finished.list_checkpoints(sort_by=CheckpointSortBy.UUID)
    with pytest.raises(ValueError, match="max_results"):
        finished.list_checkpoints(max_results=0)

    with pytest.warns(FutureWarning):
        assert steps([finished.top_checkpoint()]) == [2]
    with pytest.warns(FutureWarning):
        assert steps([finished.top_checkpoint("val_loss", smaller_is_better=False)]) == [3]
    with pytest.warns(FutureWarning):
        assert steps(finished.top_n_checkpoints(5)) == [2]  # one per trial

    (trial,) = finished.list_trials()
    assert steps(trial.list_checkpoints()) == [2, 1, 3]
    assert steps(trial.list_checkpoints(CheckpointSortBy.END_TIME, OrderBy.DESC)) == [3, 2, 1]
    with pytest.warns(FutureWarning):
        assert steps([trial.top_checkpoint()]) == [2]
    with pytest.warns(FutureWarning):
        assert steps([trial.select_checkpoint(latest=True)]) == [3]
    with pytest.warns(FutureWarning):
        assert steps([trial.select_checkpoint(best=True)]) == [2]
    with pytest.warns(FutureWarning):
        uuid = trial.list_checkpoints()[0].uuid
        assert trial.select_checkpoint(uuid=uuid).uuid == uuid
    with pytest.warns(FutureWarning), pytest.raises(ValueError, match="exactly one"):
        trial.select_checkpoint(latest=True, best=True)
    with pytest.warns(FutureWarning):
        assert steps(trial.get_checkpoints(CheckpointSortBy.BATCH_NUMBER, OrderBy.ASC)) == [1, 2, 3]


def test_checkpoint_attributes_and_describe(finished: Any, master: Master) -> None:
    sdk = Determined(master.url, "determined", "")
    best = finished.list_checkpoints(max_results=1)[0]
    ckpt = sdk.get_checkpoint(best.uuid)
    assert ckpt.state == CheckpointState.COMPLETED
    assert ckpt.training is not None and ckpt.training.experiment_id == finished.id
    assert ckpt.training.validation_metrics["avgMetrics"] == {"val_loss": 0.2}
    assert ckpt.training.hparams["steps"] == 3
    assert ckpt.metadata == {"steps_completed": 2, "framework": "none"}
    assert set(ckpt.resources or {}) == {"metadata.json", "state.json", "weights.bin"}
    text = ckpt.describe()
    assert best.uuid in text and "COMPLETED" in text and "val_loss" in text


def test_download_modes(finished: Any, tmp_path: pathlib.Path, capsys: Any) -> None:
    ckpt = finished.list_checkpoints(max_results=1)[0]
    for mode in (DownloadMode.DIRECT, DownloadMode.MASTER, DownloadMode.AUTO, "master"):
        target = tmp_path / str(mode)
        path = pathlib.Path(ckpt.download(str(target), mode=mode, progress=True))
        assert path == target
        assert json.loads((path / "state.json").read_text()) == {"step": 2}
        assert (path / "weights.bin").read_bytes() == bytes(range(16)) * 2
        assert json.loads((path / "metadata.json").read_text())["steps_completed"] == 2
    assert "weights.bin" in capsys.readouterr().err
    # A directory that already holds the checkpoint is reused as it is.
    (tmp_path / "direct" / "state.json").write_text("kept")
    ckpt.download(str(tmp_path / "direct"))
    assert (tmp_path / "direct" / "state.json").read_text() == "kept"
    with pytest.raises(ValueError):
        ckpt.download(str(tmp_path / "x"), mode="sideways")


def test_auto_download_falls_back_to_the_master(finished: Any, tmp_path: pathlib.Path) -> None:
    ckpt = finished.list_checkpoints(max_results=1)[0]
    assert ckpt.training is not None
    storage = ckpt.training.experiment_config["checkpoint_storage"]
    ckpt.training.experiment_config["checkpoint_storage"] = {
        **storage,
        "host_path": str(tmp_path / "not-mounted-here"),
    }
    with pytest.raises(FileNotFoundError):
        ckpt.download(str(tmp_path / "direct"), mode=DownloadMode.DIRECT)
    path = pathlib.Path(ckpt.download(str(tmp_path / "auto")))
    assert json.loads((path / "state.json").read_text()) == {"step": 2}


def test_metadata_edits_remove_files_and_delete(master: Master, tmp_path: pathlib.Path) -> None:
    client.login(master.url, "determined", "")
    exp = client.create_experiment(trial_config(), TRIALS)
    assert exp.wait(interval=0.05, timeout=WAIT_S) == ExperimentState.COMPLETED
    first, second, third = exp.list_checkpoints(CheckpointSortBy.BATCH_NUMBER, OrderBy.ASC)

    first.add_metadata({"note": "good", "nested": {"a": 1}})
    first.remove_metadata(["framework"])
    again = client.get_checkpoint(first.uuid)
    assert again.metadata == {"steps_completed": 1, "note": "good", "nested": {"a": 1}}
    out = tmp_path / "meta.json"
    again.write_metadata_file(str(out))
    assert json.loads(out.read_text())["note"] == "good"
    with pytest.raises(ValueError, match="keys"):
        first.remove_metadata("note")  # type: ignore[arg-type]

    second.remove_files(["*.bin"])
    from sdk.harness import poll

    def removed() -> bool:  # a GC task removes them, after remove_files returns
        second.reload()
        return second.state == CheckpointState.PARTIALLY_DELETED

    poll(removed, "the GC task removing *.bin")
    assert set(second.resources or {}) == {"metadata.json", "state.json"}
    assert not (pathlib.Path(second.download(str(tmp_path / "partial"))) / "weights.bin").exists()

    third.delete()
    third.reload()
    assert third.state == CheckpointState.DELETED
    with pytest.raises(CheckpointStateException, match="DELETED"):
        third.download(str(tmp_path / "gone"))
    with pytest.raises(APIError, match="checkpoint nope not found"):
        Checkpoint(client._determined._session, "nope").delete()  # type: ignore[union-attr]


def test_metrics(finished: Any, master: Master) -> None:
    client.login(master.url, "determined", "")
    (trial,) = finished.list_trials()
    training = list(client.iter_trials_metrics([trial.id], group="training"))
    assert [(m.trial_id, m.steps_completed, m.metrics) for m in training] == [
        (trial.id, 1, {"loss": 1.0}),
        (trial.id, 2, {"loss": 0.5}),
        (trial.id, 3, {"loss": pytest.approx(1 / 3)}),
    ]
    assert all(m.group == "training" and m.end_time is not None for m in training)
    validation = [m.metrics["val_loss"] for m in trial.iter_metrics("validation")]
    assert validation == [0.5, 0.2, 0.9]
    assert list(client.iter_trials_metrics([trial.id], "no-such-group")) == []
    with pytest.warns(FutureWarning):
        assert len(list(trial.stream_training_metrics())) == 3
    with pytest.warns(FutureWarning):
        assert [m.total_batches for m in trial.stream_validation_metrics()] == [1, 2, 3]
    with pytest.warns(FutureWarning):
        assert len(list(client.stream_trials_metrics([trial.id], "validation"))) == 3
    with pytest.warns(FutureWarning):
        assert len(list(client.stream_trials_training_metrics([trial.id]))) == 3
    with pytest.warns(FutureWarning):
        assert len(list(client.stream_trials_validation_metrics([trial.id]))) == 3
    with pytest.raises(ValueError, match="trial_ids"):
        list(client.iter_trials_metrics([], "training"))
    trial.reload()
    assert trial.summary_metrics and "val_loss" in str(trial.summary_metrics)


def test_logs(finished: Any) -> None:
    (trial,) = finished.list_trials()
    lines = list(trial.iter_logs())
    assert any("step 3 done" in line for line in lines)
    assert list(trial.iter_logs(head=2)) == lines[:2]
    assert list(trial.iter_logs(tail=2)) == lines[-2:]
    assert list(trial.iter_logs(head=0)) == []
    found = list(trial.iter_logs(search_text="step 2"))
    assert len(found) == 1 and "step 2 done" in found[0]
    assert list(trial.iter_logs(min_level=client.LogLevel.CRITICAL)) == []
    with pytest.raises(ValueError, match="at most one"):
        trial.iter_logs(follow=True, head=1)
    with pytest.raises(ValueError, match="timestamp_after"):
        trial.iter_logs(timestamp_after="yesterday")
    assert list(trial.iter_logs(timestamp_after=4102444800)) == []  # year 2100
    with pytest.warns(FutureWarning):
        assert list(trial.logs()) == lines


def test_logs_follow_streams_until_the_trial_ends(master: Master) -> None:
    client.login(master.url, "determined", "")
    exp = client.create_experiment(
        trial_config(hyperparameters={"steps": 6, "step_seconds": 0.1}), TRIALS
    )
    trial = exp.await_first_trial(interval=0.05)
    seen: list[str] = []
    reader = threading.Thread(target=lambda: seen.extend(trial.iter_logs(follow=True)))
    reader.start()
    reader.join(WAIT_S)
    assert not reader.is_alive(), "follow did not end with the trial"
    text = "".join(seen)
    assert text.index("step 1 done") < text.index("step 6 done") < text.index("trial finished")
    assert exp.wait(interval=0.05, timeout=WAIT_S) == ExperimentState.COMPLETED
