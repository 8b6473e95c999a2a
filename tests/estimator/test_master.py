"""examples/estimator on a real det master (SQLite, loopback port): the master runs in this venv, the
trials in the legacy venv (``environment.venv``). The const experiment trains, validates, checkpoints
with serving exports and completes; a paused copy of it resumes to exactly the same metrics; the
adaptive search stops trials early."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from e2e.harness import MasterAPI
from estimator_helpers import EXAMPLE, LEGACY_PYTHON, LEGACY_VENV

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.skipif(
        not LEGACY_PYTHON.exists(), reason="needs the legacy venv (make legacy-venv)"
    ),
]


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch, make_master: Any) -> MasterAPI:
    """A fresh master whose trials inherit a quiet TensorFlow log level."""
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "2")
    return make_master().api()  # type: ignore[no-any-return]


def _config(name: str, **overrides: Any) -> dict[str, Any]:
    config = yaml.safe_load((EXAMPLE / name).read_text())
    config["environment"] = {"venv": str(LEGACY_VENV)}
    config.update(overrides)
    return config


def _completed(api: MasterAPI, experiment_id: int, timeout: float = 280) -> list[dict[str, Any]]:
    state = api.wait_experiment(experiment_id, timeout=timeout)
    assert state == "STATE_COMPLETED", api.debug(experiment_id)
    trials = api.trials(experiment_id)
    assert trials and all(t["state"] == "STATE_COMPLETED" for t in trials), api.debug(experiment_id)
    return trials


def _validations(api: MasterAPI, trial_id: int) -> dict[int, dict[str, Any]]:
    return {int(r["totalBatches"]): api.values(r) for r in api.metrics(trial_id, "validation")}


def test_const_completes_and_a_paused_copy_resumes_exactly(api: MasterAPI) -> None:
    length = 6000
    overrides = {
        "searcher": {
            "name": "single",
            "metric": "accuracy",
            "smaller_is_better": False,
            "max_length": {"batches": length},
        },
        "min_validation_period": {"batches": 1500},
        "scheduling_unit": 100,
        "checkpoint_policy": "none",
        "reproducibility": {"experiment_seed": 11},
    }
    plain = api.create_experiment(_config("const.yaml", **overrides), EXAMPLE)
    paused = api.create_experiment(_config("const.yaml", **overrides), EXAMPLE)
    trial_id = api.wait_for(lambda: (api.trials(paused) or [{}])[0].get("id"), what="a trial")
    api.wait_for(lambda: api.metrics(trial_id, "validation"), timeout=180, what="a validation")
    api.post(f"/api/v1/experiments/{paused}/pause")
    api.wait_experiment(paused, {"STATE_PAUSED"}, timeout=120)
    api.wait_exited(trial_id)  # then the checkpoint of the pause is stored
    checkpoints = api.get(f"/api/v1/trials/{trial_id}/checkpoints")["checkpoints"]
    paused_at = max(c["metadata"]["steps_completed"] for c in checkpoints)
    assert 1500 <= paused_at < length, "the trial finished before the pause reached it"
    api.post(f"/api/v1/experiments/{paused}/activate")

    (reference,) = _completed(api, plain)
    (resumed,) = _completed(api, paused)
    assert any("resuming from checkpoint" in line for line in api.logs(trial_id))
    expected = _validations(api, reference["id"])
    assert sorted(expected) == [1500, 3000, 4500, 6000]
    assert 0.8 < expected[length]["accuracy"] <= 1.0 and expected[length]["batches"] == length
    # Bit-for-bit the same model after the pause: every validation after it agrees exactly.
    assert _validations(api, trial_id) == expected
    training = api.steps(api.metrics(trial_id, "training"))
    assert training == sorted(set(training)) and training[-1] == length
    final = api.get(f"/api/v1/trials/{reference['id']}/checkpoints")["checkpoints"]
    last = max(final, key=lambda c: c["metadata"]["steps_completed"])
    assert last["metadata"]["steps_completed"] == length
    assert any(
        path.startswith("raw/") and path.endswith("saved_model.pb") for path in last["resources"]
    )
    assert resumed["id"] == trial_id


def test_adaptive_search_stops_trials_early(api: MasterAPI) -> None:
    config = _config("adaptive.yaml")
    config["searcher"].update(max_trials=4, max_concurrent_trials=2)
    # A fixed seed gives the same four learning rates every run: spread enough that the rungs do not
    # tie (an unseeded run can draw four rates that all saturate at the same accuracy).
    config["reproducibility"] = {"experiment_seed": 7}
    experiment = api.create_experiment(config, EXAMPLE)
    trials = _completed(api, experiment, timeout=290)
    assert len(trials) == 4
    trained = []
    for trial in trials:
        validations = _validations(api, trial["id"])
        assert validations and all("accuracy" in v for v in validations.values()), api.debug(
            experiment
        )
        trained.append(max(validations))
    max_time = config["searcher"]["max_time"]
    assert max(trained) == max_time, trained
    assert sum(batches < max_time for batches in trained) >= 1, f"none stopped early: {trained}"
