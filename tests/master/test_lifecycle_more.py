"""More lifecycle paths: cancel, rollback of metrics after a restart, warm start, launch errors."""

from __future__ import annotations

import io
import tarfile
from typing import Any

import pytest


def test_cancel_is_graceful(client: Any, config_of: Any, waiter: Any) -> None:
    exp_id = client.create(config_of(hyperparameters={"steps": 4, "wait_preempt": 1}))
    (trial,) = waiter(lambda: client.trials(exp_id), 30, "trial created")
    waiter(
        lambda: client.get(f"/api/v1/trials/{trial['id']}")["trial"]["checkpointCount"] == 1,
        60,
        "first checkpoint",
    )
    client.post(f"/api/v1/experiments/{exp_id}/cancel")
    client.wait_state(exp_id, "STATE_CANCELED")
    assert client.trials(exp_id)[0]["state"] == "STATE_CANCELED"
    text = "".join(e["log"] for e in client.stream(f"/api/v1/trials/{trial['id']}/logs"))
    assert "preempt signal: True" in text and "exited with code 0" in text


def test_restart_rolls_back_metrics_of_the_failed_run(client: Any, config_of: Any) -> None:
    config = config_of(hyperparameters={"steps": 4, "ckpt_every": 2, "crash_at": 3}, max_restarts=1)
    exp_id = client.create(config)
    client.wait_state(exp_id, "STATE_COMPLETED")
    (trial,) = client.trials(exp_id)
    assert trial["restarts"] == 1 and trial["trialRunId"] == 2
    reports = [
        (m["totalBatches"], m["trialRunId"])
        for chunk in client.stream(
            "/api/v1/trials/metrics/trial_metrics", trialIds=trial["id"], group="training"
        )
        for m in chunk["metrics"]
    ]
    assert reports == [(1, 1), (2, 1), (3, 2), (4, 2)]


def test_warm_start_from_source_trial(client: Any, config_of: Any) -> None:
    first = client.create(config_of(hyperparameters={"steps": 2}))
    client.wait_state(first, "STATE_COMPLETED")
    (source,) = client.trials(first)
    searcher = {"name": "single", "metric": "loss", "source_trial_id": source["id"]}
    second = client.create(config_of(searcher=searcher, hyperparameters={"steps": 3}))
    client.wait_state(second, "STATE_COMPLETED")
    (trial,) = client.trials(second)
    assert trial["warmStartCheckpointUuid"]
    text = "".join(e["log"] for e in client.stream(f"/api/v1/trials/{trial['id']}/logs"))
    assert f"starting at step 2 latest={trial['warmStartCheckpointUuid']}" in text


def test_missing_venv_is_a_trial_error_with_a_log(client: Any, config_of: Any) -> None:
    exp_id = client.create(config_of(environment={"venv": "/nonexistent/venv"}))
    client.wait_state(exp_id, "STATE_ERROR")
    (trial,) = client.trials(exp_id)
    text = "".join(e["log"] for e in client.stream(f"/api/v1/trials/{trial['id']}/logs"))
    assert "environment.venv" in text


def test_trial_reads_and_master_logs(sqlite_client: Any, config_of: Any) -> None:
    client = sqlite_client
    exp_id = client.create(config_of(hyperparameters={"steps": 1}))
    client.wait_state(exp_id, "STATE_COMPLETED")
    (trial,) = client.trials(exp_id)
    ckpts = client.get(f"/api/v1/trials/{trial['id']}/checkpoints")["checkpoints"]
    assert len(ckpts) == 1
    validation = client.stream("/api/v1/trials/metrics/validation_metrics", trialIds=trial["id"])
    assert validation[0]["metrics"][0]["metrics"]["avg_metrics"]["loss"] == 1.0
    entries = client.stream("/api/v1/master/logs")
    assert any("serving on" in e["logEntry"]["message"] for e in entries)
    r = client.request("POST", f"/api/v1/trials/{trial['id']}/kill")
    assert r.status_code == 200


def test_entrypoint_argv() -> None:
    from determined.master._core._launch import entrypoint_argv

    assert entrypoint_argv("python3 train.py --x 'a b'") == ["python3", "train.py", "--x", "a b"]
    assert entrypoint_argv("model_def:MyTrial") == [
        "python3",
        "-m",
        "determined.launch.trial",
        "model_def:MyTrial",
    ]
    assert entrypoint_argv(["python3", "-m", "x"]) == ["python3", "-m", "x"]


def _tar(members: list[tarfile.TarInfo]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for member in members:
            tar.addfile(member, io.BytesIO(b"x" * member.size) if member.isfile() else None)
    return buffer.getvalue()


@pytest.mark.parametrize(
    "member",
    [
        ("../evil", tarfile.REGTYPE, ""),
        ("/abs", tarfile.REGTYPE, ""),
        ("link", tarfile.SYMTYPE, "/etc/passwd"),
        ("dev", tarfile.CHRTYPE, ""),
    ],
)
def test_extract_refuses_hostile_tarballs(tmp_path: Any, member: tuple[str, bytes, str]) -> None:
    from determined.master._core._context import ContextError, extract

    info = tarfile.TarInfo(member[0])
    info.type = member[1]
    info.linkname = member[2]
    info.size = 1 if member[1] == tarfile.REGTYPE else 0
    with pytest.raises(ContextError):
        extract(_tar([info]), tmp_path / "work")
    assert not (tmp_path / "evil").exists()


def test_follow_logs_ends_when_trial_is_terminal(client: Any, config_of: Any, waiter: Any) -> None:
    import threading

    exp_id = client.create(config_of(hyperparameters={"steps": 4, "wait_preempt": 1}))
    (trial,) = waiter(lambda: client.trials(exp_id), 30, "trial created")
    waiter(
        lambda: client.get(f"/api/v1/trials/{trial['id']}")["trial"]["checkpointCount"] == 1,
        60,
        "the trial to run",
    )
    got: list[dict[str, Any]] = []
    follower = threading.Thread(
        target=lambda: got.extend(
            client.stream(f"/api/v1/trials/{trial['id']}/logs", follow="true")
        )
    )
    follower.start()
    client.post(f"/api/v1/experiments/{exp_id}/kill")
    follower.join(30)
    assert not follower.is_alive(), "the follow stream did not end with the trial"
    text = "".join(e["log"] for e in got)
    assert "starting at step 0" in text and f"Trial {trial['id']} is now CANCELED" in text
