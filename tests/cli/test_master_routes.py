"""Master routes the CLI added: ``GET /api/v1/trials/{id}/workloads`` (upstream's GetTrialWorkloads)."""

from __future__ import annotations

import pathlib
from collections.abc import Callable

import pytest
from cli.harness import Det, created_id, wait_state

from determined.client import APIError, NotFoundError, Session


def test_trial_workloads(
    det: Det, api: Session, write_config: Callable[..., pathlib.Path], context_dir: pathlib.Path
) -> None:
    config = write_config(hyperparameters={"steps": 4}, checkpoint_storage={"save_trial_latest": 5})
    exp_id = created_id(det.ok("e", "create", str(config), str(context_dir)))
    assert wait_state(api, exp_id) == "STATE_COMPLETED"
    trial_id = api.request("GET", f"/api/v1/experiments/{exp_id}/trials")["trials"][0]["id"]
    path = f"/api/v1/trials/{trial_id}/workloads"

    answer = api.request("GET", path)
    workloads = answer["workloads"]
    assert answer["pagination"]["total"] == len(workloads) == 4 + 1 + 2  # train, val, ckpts
    steps = [next(iter(w.values()))["totalBatches"] for w in workloads]
    assert steps == sorted(steps)
    last = workloads[-3:]  # at step 4: training, then validation, then the checkpoint
    assert [next(iter(w)) for w in last] == ["training", "validation", "checkpoint"]
    assert last[1]["validation"]["metrics"]["avgMetrics"] == {"validation_loss": 0.25}
    assert last[2]["checkpoint"]["state"] == "STATE_COMPLETED"
    assert last[2]["checkpoint"]["metadata"]["steps_completed"] == 4
    assert last[0]["training"]["metrics"]["batchMetrics"] == []

    only = api.request("GET", path, params={"filter": "FILTER_OPTION_CHECKPOINT"})["workloads"]
    assert [next(iter(w)) for w in only] == ["checkpoint", "checkpoint"]
    either = api.request("GET", path, params={"filter": "FILTER_OPTION_CHECKPOINT_OR_VALIDATION"})[
        "workloads"
    ]
    assert sorted(next(iter(w)) for w in either) == ["checkpoint", "checkpoint", "validation"]

    page = api.request("GET", path, params={"offset": 2, "limit": 2, "orderBy": "ORDER_BY_DESC"})
    assert page["pagination"] == {
        "offset": 2,
        "limit": 2,
        "startIndex": 2,
        "endIndex": 4,
        "total": 7,
    }
    # newest first: checkpoint 4, validation 4, | training 4, training 3 |, checkpoint 2, ...
    assert [w["training"]["totalBatches"] for w in page["workloads"]] == [4, 3]

    with pytest.raises(APIError) as bad:
        api.request("GET", path, params={"filter": "FILTER_OPTION_NOPE"})
    assert bad.value.status == 400 and "filter" in bad.value.message
    with pytest.raises(NotFoundError):
        api.request("GET", "/api/v1/trials/987654/workloads")
