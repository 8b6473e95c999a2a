"""How searcher decisions reach trials: Stop as a preemption signal, invalid hyperparameters."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from determined.master.db import Allocation


def test_searcher_stop_reaches_trial_as_preemption(
    master: Any, client: Any, config_of: Any, waiter: Any
) -> None:
    config = config_of(
        searcher={
            "name": "async_halving",
            "metric": "loss",
            "num_rungs": 2,
            "divisor": 2,
            "max_time": 4,
            "time_metric": "batches",
            "max_trials": 2,
            "max_concurrent_trials": 1,
        },
        hyperparameters={
            "steps": 4,
            "validate_every": 2,
            "wait_preempt": 2,
            "loss_by_trial": True,
            "poll_timeout": 1,
        },
    )
    exp_id = client.create(config)
    client.wait_state(exp_id, "STATE_COMPLETED", timeout=120)
    first, second = client.trials(exp_id)
    assert first["state"] == "STATE_COMPLETED" and second["state"] == "STATE_COMPLETED"
    assert first["totalBatchesProcessed"] == 4
    assert second["totalBatchesProcessed"] == 2
    text = "".join(e["log"] for e in client.stream(f"/api/v1/trials/{second['id']}/logs"))
    assert "searcher stopped this trial" in text
    assert "preempt signal: True" in text
    # the allocation's row records the signal with its exit
    with master.db.read() as session:
        rows = session.execute(select(Allocation.trial_id, Allocation.preemption_requested))
        requested = dict(rows.all())
    assert requested[second["id"]] is True


def test_invalid_hp_early_exit_replaces_trial(client: Any, config_of: Any, files_of: Any) -> None:
    script = (
        "import json, os, requests\n"
        "info = json.load(open(os.environ['DET_CLUSTER_INFO']))\n"
        "t = info['trial_info']['trial_id']\n"
        "h = {'Authorization': 'Bearer ' + info['session_token']}\n"
        "u = info['master_url'] + f'/api/v1/trials/{t}/early_exit'\n"
        "if t == 1:\n"
        "    r = requests.post(u, json={'reason': 'EXITED_REASON_INVALID_HP'}, headers=h)\n"
        "    assert r.status_code == 200, r.text\n"
        "    r = requests.post(u, json={'reason': 'EXITED_REASON_INVALID_HP'}, headers=h)\n"
        "    assert r.status_code == 400, r.text\n"
    )
    config = config_of(
        searcher={"name": "random", "metric": "loss", "max_trials": 1},
        entrypoint="python3 invalid.py",
    )
    exp_id = client.create(config, files={"invalid.py": script})
    client.wait_state(exp_id, "STATE_COMPLETED")
    trials = client.trials(exp_id)
    assert len(trials) == 2
