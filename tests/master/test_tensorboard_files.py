"""TensorBoard files under upstream's ``<storage>/<cluster id>/tensorboard/experiment/<id>/``: a
trial's metric reports land there as event files (Core API, ``tensorboard_mode=AUTO``), the
TensorBoard task reads that layout and det's older one, and deleting the experiment (or its
TensorBoard files) removes both, against a real master."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest
from sdk.harness import TRIALS, poll, trial_config

from determined.client import APIError, create_experiment, login
from determined.tensorboard import EventSync, Source, trial_storage_path


def test_event_sync_reads_both_layouts(tmp_path: pathlib.Path) -> None:
    store = tmp_path / "store"
    for trial_id, cluster_id in ((7, "cid"), (8, "")):
        directory = store / trial_storage_path(3, trial_id, cluster_id)
        directory.mkdir(parents=True)
        (directory / "events.out.tfevents.1.host").write_bytes(b"event records")
    config = {"type": "shared_fs", "host_path": str(store)}
    events = EventSync([Source(3, config)], tmp_path / "logdir", cluster_id="cid")
    assert events.sync() == 2
    assert sorted(p.name for p in (tmp_path / "logdir").iterdir()) == ["trial_7", "trial_8"]
    assert trial_storage_path(3, 7, "cid") == "cid/tensorboard/experiment/3/trial/7"
    assert trial_storage_path(3, 7) == "tensorboard/experiment/3/trial/7"


def test_reports_land_under_the_cluster_id_and_deletes_remove_them(sqlite_master: Any) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from determined.master.db import Experiment

    s = login(sqlite_master.url, "admin", "")
    cluster_id = s.request("GET", "/info")["cluster_id"]
    assert cluster_id

    config = trial_config(hyperparameters={"steps": 2, "losses": [0.5, 0.25]})
    exp_id = int(create_experiment(s, config, TRIALS).id)
    poll(
        lambda: (
            s.request("GET", f"/api/v1/experiments/{exp_id}")["experiment"]["state"]
            == "STATE_COMPLETED"
        ),
        f"experiment {exp_id}",
    )
    with sqlite_master.db.read() as session:
        storage = session.get(Experiment, exp_id).config["checkpoint_storage"]
    root = pathlib.Path(storage["host_path"], storage.get("storage_path") or "")
    (trial,) = s.request("GET", f"/api/v1/experiments/{exp_id}/trials")["trials"]
    trial_dir = root / cluster_id / "tensorboard" / "experiment" / str(exp_id) / "trial"
    trial_dir = trial_dir / str(trial["id"])
    accumulator = EventAccumulator(str(trial_dir))
    accumulator.Reload()
    val_loss = [(e.step, e.value) for e in accumulator.Scalars("Determined/val_loss")]
    assert val_loss == [(1, 0.5), (2, 0.25)]
    assert [e.step for e in accumulator.Scalars("Determined/loss")] == [1, 2]

    old_layout = root / "tensorboard" / "experiment" / str(exp_id) / "trial" / "1"
    old_layout.mkdir(parents=True)
    (old_layout / "events.out.tfevents.1.old").write_bytes(b"")
    s.request("DELETE", f"/api/v1/experiments/{exp_id}")
    with pytest.raises(APIError):
        s.request("GET", f"/api/v1/experiments/{exp_id}")
    assert not (root / cluster_id / "tensorboard" / "experiment" / str(exp_id)).exists()
    assert not (root / "tensorboard" / "experiment" / str(exp_id)).exists()
