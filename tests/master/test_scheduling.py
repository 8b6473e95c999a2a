"""Queued trials, preemption timeouts and searcher failures."""

from __future__ import annotations

from typing import Any

import yaml


def test_pause_and_kill_while_queued(
    make_master: Any, sqlite_url: str, client_for: Any, config_of: Any, waiter: Any
) -> None:
    master = make_master(sqlite_url, slots=1)
    client = client_for(master.url)
    holder = client.create(config_of(hyperparameters={"steps": 2, "wait_preempt": 1}))
    (held,) = waiter(lambda: client.trials(holder), 30, "holder trial")
    waiter(
        lambda: client.get(f"/api/v1/trials/{held['id']}")["trial"]["checkpointCount"] == 1,
        60,
        "the holder to run",
    )
    queued = client.create(config_of(hyperparameters={"steps": 1}))
    killed = client.create(config_of(hyperparameters={"steps": 1}))
    client.post(f"/api/v1/experiments/{queued}/pause")
    assert client.trials(queued)[0]["state"] == "STATE_PAUSED"
    client.post(f"/api/v1/experiments/{killed}/kill")
    client.wait_state(killed, "STATE_CANCELED", timeout=10)
    client.post(f"/api/v1/experiments/{holder}/cancel")
    client.wait_state(holder, "STATE_CANCELED")
    assert client.experiment(queued)["state"] == "STATE_PAUSED"
    client.post(f"/api/v1/experiments/{queued}/activate")
    client.wait_state(queued, "STATE_COMPLETED")
    assert client.trials(queued)[0]["trialRunId"] == 2


def test_preemption_timeout_kills_without_counting_a_restart(
    client: Any, config_of: Any, files_of: Any, waiter: Any, tmp_path: Any
) -> None:
    marker = tmp_path / "started"
    script = (
        f"import pathlib, time\npathlib.Path({str(marker)!r}).write_text('1')\ntime.sleep(120)\n"
    )
    exp_id = client.create(
        config_of(entrypoint="python3 sleepy.py", preemption_timeout=1, max_restarts=0),
        files={"sleepy.py": script},
    )
    waiter(marker.exists, 30, "the trial to start")
    client.post(f"/api/v1/experiments/{exp_id}/pause")
    (trial,) = client.trials(exp_id)

    def paused_and_exited() -> bool:
        text = "".join(e["log"] for e in client.stream(f"/api/v1/trials/{trial['id']}/logs"))
        return "killed after the preemption timeout" in text

    waiter(paused_and_exited, 30, "the kill after the preemption timeout")
    t = client.get(f"/api/v1/trials/{trial['id']}")["trial"]
    assert t["state"] == "STATE_PAUSED" and t["restarts"] == 0
    client.post(f"/api/v1/experiments/{exp_id}/kill")
    client.wait_state(exp_id, "STATE_CANCELED")


def test_missing_searcher_metric_errors_the_experiment(client: Any, config_of: Any) -> None:
    config = config_of(
        searcher={
            "name": "async_halving",
            "metric": "accuracy",
            "num_rungs": 2,
            "max_time": 2,
            "time_metric": "batches",
            "max_trials": 1,
        },
        hyperparameters={"steps": 2, "validate_every": 1},
    )
    exp_id = client.create(config)
    exp = client.wait_state(exp_id, "STATE_ERROR")
    assert "accuracy" in (exp["error"] or "")
    assert yaml.safe_dump(config)
