"""Pause/activate and restarts with the real Core API in subprocess trials on a real master."""

from __future__ import annotations

import pathlib

import pytest
from e2e.harness import MasterAPI

TRIALS = pathlib.Path(__file__).parent / "trials"
pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _config(mode: str, max_restarts: int = 0) -> dict:
    return {
        "name": f"lifecycle-{mode}",
        "entrypoint": "python3 pausable.py",
        "searcher": {
            "name": "single",
            "metric": "value",
            "smaller_is_better": False,
            "max_length": 100,
        },
        "max_restarts": max_restarts,
        "data": {"mode": mode},
    }


def _steps(api: MasterAPI, trial_id: int) -> list[int]:
    return api.steps(api.metrics(trial_id, "training"))


def test_pause_then_activate_resumes_from_checkpoint(api: MasterAPI) -> None:
    exp = api.create_experiment(_config("pause"), TRIALS)
    trial_id = api.wait_for(lambda: (api.trials(exp) or [{}])[0].get("id"), what="a trial")
    api.wait_for(lambda: 50 in _steps(api, trial_id), what="step 50")
    api.post(f"/api/v1/experiments/{exp}/pause")
    api.wait_experiment(exp, {"STATE_PAUSED"})
    api.wait_for(
        lambda: any("preempted at step 50" in line for line in api.logs(trial_id)),
        what="the trial to notice the pause",
    )
    api.wait_for(lambda: api.trials(exp)[0]["state"] == "STATE_PAUSED", what="trial paused")
    api.post(f"/api/v1/experiments/{exp}/activate")
    assert api.wait_experiment(exp) == "STATE_COMPLETED", api.debug(exp)
    assert _steps(api, trial_id) == list(range(10, 101, 10))
    assert any("resumed from step 50" in line for line in api.logs(trial_id))
    (validation,) = api.metrics(trial_id, "validation")
    assert api.values(validation)["value"] == 100.0  # the state really came from the checkpoint


def test_crash_is_restarted_from_the_latest_checkpoint(api: MasterAPI) -> None:
    exp = api.create_experiment(_config("crash_once", max_restarts=2), TRIALS)
    assert api.wait_experiment(exp) == "STATE_COMPLETED", api.debug(exp)
    (trial,) = api.trials(exp)
    assert trial["restarts"] == 1
    assert any("resumed from step 50" in line for line in api.logs(trial["id"]))


def test_crash_exceeding_max_restarts_errors(api: MasterAPI) -> None:
    exp = api.create_experiment(_config("crash_always", max_restarts=2), TRIALS)
    assert api.wait_experiment(exp) == "STATE_ERROR", api.debug(exp)
    (trial,) = api.trials(exp)
    assert trial["state"] == "STATE_ERROR"
    logs = api.logs(trial["id"])
    # 1 + max_restarts runs: the first crashes at step 50, the two restarts resume there and fail at the end
    assert len([line for line in logs if "crashing on purpose" in line]) == 1
    assert len([line for line in logs if "resumed from step 50" in line]) == 2
