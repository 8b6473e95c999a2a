"""Experiments end to end: a real master launches real trial processes."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from sqlalchemy import insert

from determined.master._api._trial_sort import sort_trial_json
from determined.master.db import Experiment, Run, User


def test_single_trial_completes(client: Any, config_of: Any) -> None:
    exp_id = client.create(config_of(hyperparameters={"steps": 3, "validate_every": 1}))
    exp = client.wait_state(exp_id, "STATE_COMPLETED")
    assert exp["progress"] == 1.0
    (trial,) = client.trials(exp_id)
    assert trial["state"] == "STATE_COMPLETED"
    assert trial["totalBatchesProcessed"] == 3
    assert trial["latestValidation"]["totalBatches"] == 3
    assert trial["searcherMetricValue"] == 1.0 / 3
    assert trial["summaryMetrics"]["avg_metrics"]["loss"]["count"] == 3
    assert trial["summaryMetrics"]["avg_metrics"]["loss"]["min"] == 1.0 / 3
    assert trial["restarts"] == 0
    metrics = client.stream(
        "/api/v1/trials/metrics/trial_metrics", trialIds=trial["id"], group="training"
    )
    reports = [m for chunk in metrics for m in chunk["metrics"]]
    assert [m["totalBatches"] for m in reports] == [1, 2, 3]
    assert reports[0]["metrics"]["avg_metrics"]["loss"] == 1.0
    ckpts = client.get(f"/api/v1/experiments/{exp_id}/checkpoints")["checkpoints"]
    assert len(ckpts) == 1 and ckpts[0]["metadata"]["steps_completed"] == 3
    assert ckpts[0]["state"] == "STATE_COMPLETED"
    got = client.get(f"/api/v1/checkpoints/{ckpts[0]['uuid']}")["checkpoint"]
    assert got["training"]["trialId"] == trial["id"]
    assert int(got["resources"]["state.json"]) > 0
    logs = client.stream(f"/api/v1/trials/{trial['id']}/logs")
    text = "".join(entry["log"] for entry in logs)
    assert f"trial {trial['id']} done" in text
    assert "exited with code 0" in text
    ranked = [e for e in logs if e["rankId"] == 0]
    assert ranked and ranked[0]["level"] == "LOG_LEVEL_INFO"
    stderr = client.stream(f"/api/v1/trials/{trial['id']}/logs", stdtypes="stderr")
    assert any("some stderr line" in e["log"] for e in stderr)
    limited = client.stream(f"/api/v1/trials/{trial['id']}/logs", limit=2)
    assert len(limited) == 2
    best = client.get(f"/api/v1/experiments/{exp_id}/searcher/best_searcher_validation_metric")
    assert best["metric"] == 1.0 / 3
    history = client.get(f"/api/v1/experiments/{exp_id}/validation-history")["validationHistory"]
    assert history[-1]["searcherMetric"] == 1.0 / 3
    followed = client.stream(f"/api/v1/trials/{trial['id']}/logs", follow="true")
    assert len(followed) == len(logs)


def test_random_search_three_trials(client: Any, config_of: Any) -> None:
    config = config_of(
        searcher={"name": "random", "metric": "loss", "max_trials": 3, "max_concurrent_trials": 2},
        hyperparameters={"steps": 2, "base": {"type": "double", "minval": 1.0, "maxval": 2.0}},
    )
    exp_id = client.create(config)
    client.wait_state(exp_id, "STATE_COMPLETED")
    trials = client.trials(exp_id)
    assert len(trials) == 3
    assert all(t["state"] == "STATE_COMPLETED" for t in trials)
    assert len({t["hparams"]["base"] for t in trials}) == 3
    listed = client.get("/api/v1/experiments", params={"states": "STATE_COMPLETED"})
    assert exp_id in [e["id"] for e in listed["experiments"]]


def test_pause_activate_resumes_from_checkpoint(client: Any, config_of: Any, waiter: Any) -> None:
    exp_id = client.create(config_of(hyperparameters={"steps": 4, "wait_preempt": 2}))
    (trial,) = waiter(lambda: client.trials(exp_id), 30, "trial created")
    waiter(
        lambda: client.get(f"/api/v1/trials/{trial['id']}")["trial"]["checkpointCount"] == 1,
        60,
        "first checkpoint",
    )
    client.post(f"/api/v1/experiments/{exp_id}/pause")
    assert client.experiment(exp_id)["state"] == "STATE_PAUSED"

    def exited() -> bool:
        text = "".join(e["log"] for e in client.stream(f"/api/v1/trials/{trial['id']}/logs"))
        return "preempt signal: True" in text and "exited with code 0" in text

    waiter(exited, 60, "the trial to exit after preemption")
    assert client.get(f"/api/v1/trials/{trial['id']}")["trial"]["state"] == "STATE_PAUSED"
    client.post(f"/api/v1/experiments/{exp_id}/activate")
    client.wait_state(exp_id, "STATE_COMPLETED")
    t = client.get(f"/api/v1/trials/{trial['id']}")["trial"]
    assert t["trialRunId"] == 2
    assert t["restarts"] == 0
    text = "".join(e["log"] for e in client.stream(f"/api/v1/trials/{trial['id']}/logs"))
    assert "run 2 starting at step 2 latest=" in text
    reports = [
        m
        for chunk in client.stream(
            "/api/v1/trials/metrics/trial_metrics", trialIds=trial["id"], group="training"
        )
        for m in chunk["metrics"]
    ]
    assert [m["totalBatches"] for m in reports] == [1, 2, 3, 4]


def test_crash_restarts_then_error(client: Any, config_of: Any) -> None:
    exp_id = client.create(config_of(hyperparameters={"crash": 1}, max_restarts=2))
    client.wait_state(exp_id, "STATE_ERROR")
    (trial,) = client.trials(exp_id)
    assert trial["state"] == "STATE_ERROR"
    assert trial["restarts"] == 2  # restarts made, as upstream: 3 runs, the last one failed too
    assert trial["trialRunId"] == 3
    text = "".join(e["log"] for e in client.stream(f"/api/v1/trials/{trial['id']}/logs"))
    assert "exceeded max restarts (2)" in text
    assert text.count("crashing on purpose") == 3


def test_kill(client: Any, config_of: Any, waiter: Any) -> None:
    exp_id = client.create(config_of(hyperparameters={"steps": 4, "wait_preempt": 1}))
    (trial,) = waiter(lambda: client.trials(exp_id), 30, "trial created")
    waiter(
        lambda: client.get(f"/api/v1/trials/{trial['id']}")["trial"]["checkpointCount"] == 1,
        60,
        "first checkpoint",
    )
    client.post(f"/api/v1/experiments/{exp_id}/kill")
    client.wait_state(exp_id, "STATE_CANCELED")
    assert client.trials(exp_id)[0]["state"] == "STATE_CANCELED"


def test_stale_trial_run_id_rejected(client: Any, config_of: Any, waiter: Any) -> None:
    exp_id = client.create(config_of(hyperparameters={"steps": 2}))
    client.wait_state(exp_id, "STATE_COMPLETED")
    (trial,) = client.trials(exp_id)
    r = client.request(
        "POST",
        f"/api/v1/trials/{trial['id']}/metrics",
        json={
            "group": "training",
            "metrics": {
                "trialRunId": 7,
                "stepsCompleted": 9,
                "metrics": {"avgMetrics": {"loss": 1}},
            },
        },
    )
    assert r.status_code == 400
    assert "7 (reported) != 1 (expected)" in r.json()["error"]["error"]


def test_trials_sorted_by_the_master_before_paging(client: Any, config_of: Any) -> None:
    """sortBy/orderBy as upstream: the validation sorts use the signed searcher metric (best first
    in ascending order, here where larger is better), then the page is cut; bad values are a 400."""
    config = config_of(
        searcher={
            "name": "grid",
            "metric": "loss",
            "smaller_is_better": False,
            "max_concurrent_trials": 3,
        },
        hyperparameters={"steps": 1, "base": {"type": "categorical", "vals": [2.0, 3.0, 1.0]}},
    )
    exp_id = client.create(config)
    client.wait_state(exp_id, "STATE_COMPLETED")
    by_base = {t["hparams"]["base"]: t["id"] for t in client.trials(exp_id)}
    path = f"/api/v1/experiments/{exp_id}/trials"

    def ids(**params: Any) -> list[int]:
        return [t["id"] for t in client.get(path, params=params)["trials"]]

    best_first = [by_base[3.0], by_base[2.0], by_base[1.0]]
    experiment = client.get(f"/api/v1/experiments/{exp_id}")["experiment"]
    assert experiment["bestTrialId"] == by_base[3.0]
    assert experiment["bestTrialSearcherMetric"] == 3.0
    assert ids(sortBy="SORT_BY_BEST_VALIDATION_METRIC") == best_first
    assert ids(sortBy="SORT_BY_LATEST_VALIDATION_METRIC") == best_first
    assert ids(sortBy="SORT_BY_BEST_VALIDATION_METRIC", orderBy="ORDER_BY_DESC") == best_first[::-1]
    assert ids(sortBy="SORT_BY_BEST_VALIDATION_METRIC", limit=1, offset=1) == best_first[1:2]
    assert ids(orderBy="ORDER_BY_DESC") == sorted(by_base.values(), reverse=True)
    # by id the database cuts the page: the pagination still counts every (matching) trial
    by_id = sorted(by_base.values())
    assert ids(limit=1, offset=1) == by_id[1:2] and ids(offset=2) == by_id[2:]
    page = client.get(path, params={"limit": 2, "offset": 2, "orderBy": "ORDER_BY_DESC"})
    assert [t["id"] for t in page["trials"]] == by_id[:1]
    assert page["pagination"] == {
        "offset": 2, "limit": 2, "startIndex": 2, "endIndex": 3, "total": 3,
    }  # fmt: skip
    done = client.get(path, params={"states": "STATE_COMPLETED", "limit": 1})["pagination"]
    assert done["total"] == 3
    assert client.get(path, params={"states": "STATE_ERROR"})["pagination"]["total"] == 0
    for bad in ({"sortBy": "SORT_BY_NAME"}, {"orderBy": "SIDEWAYS"}):
        response = client.request("GET", path, params=bad)
        assert response.status_code == 400
        assert next(iter(bad)) in response.json()["error"]["error"]


@pytest.mark.parametrize("smaller_is_better", [True, False])
def test_database_sorts_page_as_the_trial_json_sort_does(
    master: Any, client: Any, smaller_is_better: bool
) -> None:
    """Each sortBy the database orders by gives the order sort_trial_json gives the same trials:
    ties broken by id in the same direction, trials without a value last either way."""
    start = datetime.datetime(2025, 3, 1, 12, 0, 0, 1000)
    states = ["COMPLETED", "ERROR", "CANCELED", "ACTIVE"]
    with master.db.write() as session:
        owner = session.query(User).filter(User.username == "determined").one().id
        searcher = {"name": "random", "metric": "loss", "smaller_is_better": smaller_is_better}
        exp = Experiment(config={"name": "sorts", "searcher": searcher}, owner_id=owner)
        session.add(exp)
        session.flush()
        exp_id = exp.id
        session.execute(
            insert(Run),
            [
                {
                    "experiment_id": exp_id,
                    "request_id": f"s{i}",
                    "task_id": f"sorts-{exp_id}-{i}",
                    "state": states[i % 4],
                    "hparams": {},
                    "restarts": i % 3,
                    "total_batches": (i * 7) % 5,
                    "searcher_metric_value": None if i % 5 == 0 else float((i * 3) % 4),
                    "start_time": start + datetime.timedelta(seconds=(i * 5) % 7),
                    "end_time": None if i % 4 == 0 else start + datetime.timedelta(hours=i % 3),
                    "run_id": 1,
                }
                for i in range(14)
            ],
        )
    path = f"/api/v1/experiments/{exp_id}/trials"
    everything = client.get(path)["trials"]
    assert len(everything) == 14
    sorts = [
        "SORT_BY_BEST_VALIDATION_METRIC", "SORT_BY_START_TIME", "SORT_BY_END_TIME",
        "SORT_BY_STATE", "SORT_BY_BATCHES_PROCESSED", "SORT_BY_RESTARTS",
    ]  # fmt: skip
    for sort in sorts:
        for order in ("ORDER_BY_ASC", "ORDER_BY_DESC"):
            expected = [
                t["id"]
                for t in sort_trial_json(
                    everything,
                    sort,
                    descending=order == "ORDER_BY_DESC",
                    searcher_metric="loss",
                    smaller_is_better=smaller_is_better,
                )
            ]
            params = {"sortBy": sort, "orderBy": order}
            got = [t["id"] for t in client.get(path, params=params)["trials"]]
            assert got == expected, (sort, order)
            page = client.get(path, params={**params, "offset": 4, "limit": 5})
            assert [t["id"] for t in page["trials"]] == expected[4:9], (sort, order)
            assert page["pagination"]["total"] == 14
