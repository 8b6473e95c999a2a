"""Metric reads across trials against a real master and real reported metrics: the compare-trials
time series (``GET /api/v1/trials/time-series``), the experiment metric streams
(``/api/v1/experiments/.../metrics-stream/...``), a project's metric columns and metric ranges, and
experiment listings that hide archived projects and workspaces."""

from __future__ import annotations

import csv
import datetime
import io
import json
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from master.conftest import TRIAL_SCRIPT, Client, context_files, exp_config, wait_for

WAIT_S = 120.0


@pytest.fixture(scope="module")
def client(module_db_url: str, make_module_master: Any) -> Iterator[Client]:
    handle = make_module_master(module_db_url)
    yield Client(handle.url).login()
    handle.stop()


def _project(client: Client) -> tuple[int, int]:
    """A new workspace and project: ``(workspace id, project id)``."""
    ws = client.post("/api/v1/workspaces", {"name": f"ws-{uuid.uuid4().hex[:8]}"})["workspace"]
    body = {"name": f"p-{uuid.uuid4().hex[:8]}", "workspaceId": ws["id"]}
    project = client.post(f"/api/v1/workspaces/{ws['id']}/projects", body)["project"]
    return int(ws["id"]), int(project["id"])


def _create(
    client: Client, config: dict[str, Any], *, project_id: int = 1, activate: bool = True
) -> int:
    body = {
        "config": yaml.safe_dump(config),
        "modelDefinition": context_files({"trial.py": TRIAL_SCRIPT}),
        "activate": activate,
        "projectId": project_id,
    }
    return int(client.post("/api/v1/experiments", body)["experiment"]["id"])


def _completed(client: Client, exp_id: int) -> None:
    client.wait_state(exp_id, "STATE_COMPLETED", timeout=WAIT_S)


def _refused(client: Client, path: str, status: int, *fields: str, **params: Any) -> None:
    r = client.request("GET", path, params=params)
    assert r.status_code == status, r.text
    for field in fields:
        assert field in r.text, r.text


@pytest.fixture(scope="module")
def single(client: Client) -> dict[str, int]:
    """A completed single-trial experiment in a project of its own: training ``loss`` 1/step and
    ``epoch`` at steps 1..5, validation ``loss`` 1/step and ``batches`` at steps 2, 4 and 5."""
    workspace_id, project_id = _project(client)
    config = exp_config(hyperparameters={"steps": 5, "validate_every": 2})
    exp_id = _create(client, config, project_id=project_id)
    _completed(client, exp_id)
    trial_id = int(client.trials(exp_id)[0]["id"])
    return {
        "experiment": exp_id,
        "trial": trial_id,
        "project": project_id,
        "workspace": workspace_id,
    }


def _time_series(client: Client, **params: Any) -> list[dict[str, Any]]:
    return client.get("/api/v1/trials/time-series", params=params)["trials"]  # type: ignore[no-any-return]


def test_time_series_by_metric_ids(client: Client, single: dict[str, int]) -> None:
    trial_id = single["trial"]
    (trial,) = _time_series(
        client, trialIds=[trial_id], metricIds=["validation.loss", "training.loss"]
    )
    assert trial["trial"]["id"] == trial_id
    assert trial["trial"]["experimentId"] == single["experiment"]
    training, validation = trial["metrics"]  # groups in name order
    assert (training["group"], training["type"]) == ("training", "METRIC_TYPE_TRAINING")
    assert (validation["group"], validation["type"]) == ("validation", "METRIC_TYPE_VALIDATION")
    assert [p["batches"] for p in training["data"]] == [1, 2, 3, 4, 5]
    assert [p["values"] for p in training["data"]] == [{"loss": 1.0 / s} for s in range(1, 6)]
    assert [p["epoch"] for p in training["data"]] == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert all(p["time"] for p in training["data"])
    assert [(p["batches"], p["values"]["loss"]) for p in validation["data"]] == [
        (2, 0.5),
        (4, 0.25),
        (5, 0.2),
    ]
    assert validation["data"][0]["epoch"] is None


def test_time_series_downsampling_ranges_and_legacy_names(
    client: Client, single: dict[str, int]
) -> None:
    trial_id = single["trial"]
    (trial,) = _time_series(client, trialIds=trial_id, metricIds="training.loss", maxDatapoints=2)
    assert [p["batches"] for p in trial["metrics"][0]["data"]] == [1, 5]  # first and last kept
    (trial,) = _time_series(
        client, trial_ids=trial_id, metric_ids="training.loss", start_batches=2, end_batches=4
    )
    assert [p["batches"] for p in trial["metrics"][0]["data"]] == [2, 3, 4]
    # metricNames with the deprecated metricType; without a group, both training and validation
    (trial,) = _time_series(
        client, trialIds=trial_id, metricNames="loss", metricType="METRIC_TYPE_VALIDATION"
    )
    assert [m["group"] for m in trial["metrics"]] == ["validation"]
    (trial,) = _time_series(client, trialIds=trial_id, metricNames="loss")
    assert [m["group"] for m in trial["metrics"]] == ["training", "validation"]
    (trial,) = _time_series(client, trialIds=trial_id, metricIds="training.nothing")
    assert trial["metrics"] == []


def test_time_series_custom_group_reported_by_a_user(client: Client) -> None:
    """Upstream's e2e test: a user reports to a paused experiment's trial in any group."""
    exp_id = _create(client, exp_config(), activate=False)
    trial_id = wait_for(lambda: client.trials(exp_id), WAIT_S, "the paused experiment's trial")[0][
        "id"
    ]
    report = {"trialId": trial_id, "trialRunId": 0, "stepsCompleted": 10}
    report["metrics"] = {"avgMetrics": {"lossx": 3.3, "note": "text"}}
    client.post(f"/api/v1/trials/{trial_id}/metrics", {"group": "abc", "metrics": report})
    (trial,) = _time_series(client, trialIds=trial_id, metricIds=["abc.lossx", "abc.note"])
    (series,) = trial["metrics"]
    assert (series["group"], series["type"]) == ("abc", "METRIC_TYPE_UNSPECIFIED")
    assert series["data"][0]["batches"] == 10
    assert series["data"][0]["values"] == {"lossx": 3.3, "note": "text"}

    columns = {c["column"]: c for c in client.get("/api/v1/projects/1/columns")["columns"]}
    for stat in ("last", "max", "mean", "min"):
        assert columns[f"abc.lossx.{stat}"]["type"] == "COLUMN_TYPE_NUMBER"
        assert columns[f"abc.lossx.{stat}"]["location"] == "LOCATION_TYPE_CUSTOM_METRIC"
    assert columns["abc.note.last"]["type"] == "COLUMN_TYPE_TEXT"  # not a number: last only
    assert "abc.note.min" not in columns
    client.post(f"/api/v1/experiments/{exp_id}/kill")


def test_time_series_bad_requests_name_the_field(client: Client, single: dict[str, int]) -> None:
    path, trial_id = "/api/v1/trials/time-series", single["trial"]
    _refused(client, path, 400, "trialIds")
    _refused(client, path, 400, "trialIds", trialIds="x")
    _refused(client, path, 400, "metricIds", trialIds=trial_id, metricIds="loss")
    _refused(client, path, 400, "metricIds", trialIds=trial_id, metricIds="a.b.c.", metricNames="x")
    _refused(client, path, 400, "maxDatapoints", trialIds=trial_id, maxDatapoints=-1)
    _refused(client, path, 400, "metricType", trialIds=trial_id, metricType="METRIC_TYPE_BOGUS")
    _refused(client, path, 404, f"trial {10**9}", trialIds=10**9)


def test_project_columns_and_metric_ranges(client: Client, single: dict[str, int]) -> None:
    project_id = single["project"]
    columns = client.get(f"/api/v1/projects/{project_id}/columns")["columns"]
    names = [c["column"] for c in columns]
    metric_names = [n for n in names if n.startswith(("training.", "validation."))]
    assert metric_names == [
        f"{group}.{name}.{stat}"
        for group, metric in (("training", ("epoch", "loss")), ("validation", ("batches", "loss")))
        for name in metric
        for stat in ("last", "max", "mean", "min")
    ]
    by_name = {c["column"]: c for c in columns}
    assert by_name["validation.loss.min"]["location"] == "LOCATION_TYPE_VALIDATIONS"
    assert by_name["training.loss.mean"]["location"] == "LOCATION_TYPE_TRAINING"
    assert names.index("validation.loss.min") < names.index("hp.steps")  # upstream's order

    ranges = client.get(f"/api/v1/projects/{project_id}/experiments/metric-ranges")["ranges"]
    found = {r["metricsName"]: (r["min"], r["max"]) for r in ranges}
    assert found["validation.loss.min"] == (0.2, 0.2)
    assert found["validation.loss.max"] == (0.5, 0.5)
    assert found["training.epoch.last"] == (5.0, 5.0)
    assert found["searcherMetricsVal"] == (0.2, 0.2)
    assert all(low <= high for low, high in found.values())

    # a second experiment widens the ranges
    second = _create(client, exp_config(hyperparameters={"steps": 2}), project_id=project_id)
    _completed(client, second)
    ranges = client.get(f"/api/v1/projects/{project_id}/experiments/metric-ranges")["ranges"]
    found = {r["metricsName"]: (r["min"], r["max"]) for r in ranges}
    assert found["validation.loss.last"] == (0.2, 0.5)
    assert found["searcherMetricsVal"] == (0.2, 0.5)
    _refused(client, "/api/v1/projects/999999/experiments/metric-ranges", 404, "project 999999")


def test_streams_of_a_finished_experiment(client: Client, single: dict[str, int]) -> None:
    exp_id = single["experiment"]
    (names,) = client.stream(
        "/api/v1/experiments/metrics-stream/metric-names", ids=exp_id, period_seconds=1
    )
    assert names["searcherMetrics"] == ["loss"]
    assert names["trainingMetrics"] == ["epoch", "loss"]
    assert names["validationMetrics"] == ["batches", "loss"]
    assert {(m["group"], m["name"]) for m in names["metricNames"]} == {
        ("training", "epoch"),
        ("training", "loss"),
        ("validation", "batches"),
        ("validation", "loss"),
    }
    base = f"/api/v1/experiments/{exp_id}/metrics-stream"
    (batches,) = client.stream(f"{base}/batches", metricName="loss", group="validation")
    assert batches == {"batches": [2, 4, 5]}
    (snapshot,) = client.stream(
        f"{base}/trials-snapshot",
        metric_name="loss",
        metric_type="METRIC_TYPE_VALIDATION",
        batches_processed=3,
        batches_margin=1,
    )
    assert [(t["trialId"], t["metric"], t["batchesProcessed"]) for t in snapshot["trials"]] == [
        (single["trial"], 0.5, 2),
        (single["trial"], 0.25, 4),
    ]
    assert snapshot["trials"][0]["hparams"]["steps"] == 5
    _refused(
        client, f"{base}/trials-sample", 400, "single-trial", metricName="loss", group="validation"
    )


def test_trials_sample_of_a_search(client: Client) -> None:
    hps = {"steps": 3, "base": {"type": "double", "minval": 1.0, "maxval": 2.0}}
    config = exp_config(
        hyperparameters=hps,
        searcher={"name": "random", "metric": "loss", "max_trials": 2},
    )
    exp_id = _create(client, config)
    _completed(client, exp_id)
    trials = {t["id"]: t for t in client.trials(exp_id)}
    (sample,) = client.stream(
        f"/api/v1/experiments/{exp_id}/metrics-stream/trials-sample",
        metricName="loss",
        metricType="METRIC_TYPE_VALIDATION",
    )
    assert sorted(sample["promotedTrials"]) == sorted(trials)
    assert sample["demotedTrials"] == []
    losses = {t["trialId"]: t["data"][0]["values"]["loss"] for t in sample["trials"]}
    assert list(losses) == sorted(losses, key=losses.__getitem__)  # best (smallest) first
    for entry in sample["trials"]:
        base = entry["hparams"]["base"]
        assert base == trials[entry["trialId"]]["hparams"]["base"]
        assert [p["batches"] for p in entry["data"]] == [3]
        assert losses[entry["trialId"]] == pytest.approx(base / 3)


def _follow(client: Client, path: str, params: dict[str, Any], out: list[dict[str, Any]]) -> None:
    r = client.request("GET", path, params=params, stream=True, timeout=WAIT_S)
    assert r.status_code == 200, r.text
    for line in r.iter_lines():
        if line:
            out.append(json.loads(line)["result"])


def test_streams_follow_a_running_experiment(client: Client) -> None:
    """Opened on a paused experiment: an empty first line, then each name and step exactly once,
    ending when the experiment completes (upstream's e2e test of the same streams)."""
    exp_id = _create(client, exp_config(hyperparameters={"steps": 3}), activate=False)
    names: list[dict[str, Any]] = []
    batches: list[dict[str, Any]] = []
    base = f"/api/v1/experiments/{exp_id}/metrics-stream"
    threads = [
        threading.Thread(
            target=_follow,
            args=(client, "/api/v1/experiments/metrics-stream/metric-names"),
            kwargs={"params": {"ids": exp_id, "periodSeconds": 1}, "out": names},
        ),
        threading.Thread(
            target=_follow,
            args=(client, f"{base}/batches"),
            kwargs={
                "params": {
                    "metricName": "loss",
                    "metricType": "METRIC_TYPE_TRAINING",
                    "periodSeconds": 1,
                },
                "out": batches,
            },
        ),
    ]
    for thread in threads:
        thread.start()
    wait_for(lambda: names and batches, WAIT_S, "the first lines of both streams")
    client.post(f"/api/v1/experiments/{exp_id}/activate")
    for thread in threads:
        thread.join(WAIT_S)
        assert not thread.is_alive(), "the stream did not end with the experiment"
    assert names[0]["searcherMetrics"] == ["loss"]
    assert (names[0]["trainingMetrics"], names[0]["validationMetrics"]) == ([], [])
    training = [n for line in names[1:] for n in line["trainingMetrics"]]
    validation = [n for line in names[1:] for n in line["validationMetrics"]]
    assert sorted(training) == ["epoch", "loss"]
    assert sorted(validation) == ["batches", "loss"]
    assert all(line["searcherMetrics"] == [] for line in names[1:])
    assert batches[0] == {"batches": []}
    assert sorted(b for line in batches[1:] for b in line["batches"]) == [1, 2, 3]


def test_stream_bad_requests_name_the_field(client: Client, single: dict[str, int]) -> None:
    base = f"/api/v1/experiments/{single['experiment']}/metrics-stream"
    _refused(client, "/api/v1/experiments/metrics-stream/metric-names", 400, "ids")
    _refused(
        client,
        "/api/v1/experiments/metrics-stream/metric-names",
        404,
        "experiment 999999",
        ids=999999,
    )
    _refused(client, f"{base}/batches", 400, "metricName", group="training")
    _refused(client, f"{base}/batches", 400, "metricType", metricName="loss")
    _refused(client, f"{base}/batches", 400, "group", metricName="loss", group="a.b")
    _refused(
        client,
        f"{base}/batches",
        400,
        "periodSeconds",
        metricName="loss",
        group="x",
        periodSeconds=-1,
    )
    _refused(
        client,
        f"{base}/trials-snapshot",
        400,
        "batchesMargin",
        metricName="loss",
        group="validation",
        batchesMargin=101,
    )
    _refused(
        client,
        "/api/v1/experiments/999999/metrics-stream/batches",
        404,
        "experiment 999999",
        metricName="loss",
        group="training",
    )


def test_listing_hides_archived_projects_and_workspaces(client: Client) -> None:
    workspace_id, first = _project(client)
    body = {"name": f"p-{uuid.uuid4().hex[:8]}", "workspaceId": workspace_id}
    second = int(client.post(f"/api/v1/workspaces/{workspace_id}/projects", body)["project"]["id"])
    in_first = _create(client, exp_config(), project_id=first, activate=False)
    in_second = _create(client, exp_config(), project_id=second, activate=False)

    def listed(**params: Any) -> set[int]:
        params.setdefault("limit", -1)
        return {e["id"] for e in client.get("/api/v1/experiments", params=params)["experiments"]}

    assert {in_first, in_second} <= listed(archived="false")
    client.post(f"/api/v1/projects/{first}/archive")
    assert in_first not in listed(archived="false")
    assert in_second in listed(archived="false")
    assert in_first in listed(archived="false", projectId=first)  # a project asked for by id
    assert {in_first, in_second} <= listed()  # no archived filter: everything
    client.post(f"/api/v1/workspaces/{workspace_id}/archive")
    assert not {in_first, in_second} & listed(archived="false")
    assert {in_first, in_second} <= listed()
    assert in_first not in listed(archived="true")  # the experiment itself is not archived


def test_allocation_csv_names_the_workspace(client: Client, single: dict[str, int]) -> None:
    """Each row of the allocation CSV names the workspace of its experiment."""
    workspace = client.get(f"/api/v1/workspaces/{single['workspace']}")["workspace"]["name"]
    now = datetime.datetime.now(datetime.timezone.utc)
    params = {
        "timestamp_after": (now - datetime.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "timestamp_before": (now + datetime.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    r = client.request("GET", "/resources/allocation/allocations-csv", params=params)
    assert r.status_code == 200, r.text
    rows = list(csv.DictReader(io.StringIO(r.text)))
    mine = [row for row in rows if row["experiment_id"] == str(single["experiment"])]
    assert mine, r.text
    assert {row["workspace_name"] for row in mine} == {workspace}
