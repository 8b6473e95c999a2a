"""``continue`` gives a trial a new task (upstream's ``<task id>-N``), against a real master: the
trial lists both in ``taskIds``, the new task has its own start and end times, the trial's logs
span both tasks, and deleting the experiment removes both."""

from __future__ import annotations

from typing import Any

import pytest
from sdk.harness import TRIALS, poll, trial_config

from determined.client import APIError, Session, create_experiment, login


def _wait_terminal(session: Session, exp_id: int) -> str:
    def terminal() -> str | None:
        state = session.request("GET", f"/api/v1/experiments/{exp_id}")["experiment"]["state"]
        return state if state in ("STATE_COMPLETED", "STATE_ERROR", "STATE_CANCELED") else None

    return str(poll(terminal, f"experiment {exp_id} ending"))


def _trial(session: Session, exp_id: int) -> dict[str, Any]:
    (trial,) = session.request("GET", f"/api/v1/experiments/{exp_id}/trials")["trials"]
    return dict(trial)


def _log_text(session: Session, trial_id: int) -> str:
    import json

    import requests

    url = f"{session.master_url}/api/v1/trials/{trial_id}/logs"
    r = requests.get(url, headers=session.headers(), timeout=60)
    r.raise_for_status()
    return "".join(json.loads(line)["result"]["log"] for line in r.text.splitlines() if line)


def test_continue_runs_the_trial_as_a_new_task(sqlite_master: Any) -> None:
    s = login(sqlite_master.url, "admin", "")
    exp_id = create_experiment(s, trial_config(hyperparameters={"steps": 1}), TRIALS).id
    assert _wait_terminal(s, exp_id) == "STATE_COMPLETED"
    first = _trial(s, exp_id)
    (task_id,) = first["taskIds"]
    first_task = s.request("GET", f"/api/v1/tasks/{task_id}")["task"]
    assert first_task["endTime"] is not None

    body = {"id": exp_id, "overrideConfig": "hyperparameters:\n  steps: 2\n"}
    s.request("POST", "/api/v1/experiments/continue", body=body)
    assert _wait_terminal(s, exp_id) == "STATE_COMPLETED"

    again = _trial(s, exp_id)
    assert again["taskIds"] == [task_id, f"{task_id}-1"]
    assert again["startTime"] == first["startTime"] and again["endTime"] > first["endTime"]
    new_task = s.request("GET", f"/api/v1/tasks/{task_id}-1")["task"]
    assert new_task["taskType"] == "TASK_TYPE_TRIAL"
    assert new_task["startTime"] > first_task["endTime"]
    assert new_task["endTime"] is not None and new_task["endTime"] > new_task["startTime"]
    assert s.request("GET", f"/api/v1/tasks/{task_id}")["task"]["endTime"] == first_task["endTime"]
    logs = _log_text(s, again["id"])
    assert "step 1 done" in logs and "resumed from" in logs and "step 2 done" in logs

    # a second continue: "-2"
    s.request("POST", "/api/v1/experiments/continue", body={"id": exp_id})
    assert _wait_terminal(s, exp_id) == "STATE_COMPLETED"
    assert _trial(s, exp_id)["taskIds"] == [task_id, f"{task_id}-1", f"{task_id}-2"]

    s.request("DELETE", f"/api/v1/experiments/{exp_id}")
    for gone in (task_id, f"{task_id}-1", f"{task_id}-2"):
        with pytest.raises(APIError) as err:
            s.request("GET", f"/api/v1/tasks/{gone}")
        assert err.value.status == 404
