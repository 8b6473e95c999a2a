"""The endpoints a trial calls (core-api.md §2.2), checkpoint GC and deletion, continue."""

from __future__ import annotations

import json
import pathlib
import time
from typing import Any

PROBE = r"""
import json, os, pathlib, sys, time, uuid
import requests

info = json.load(open(os.environ["DET_CLUSTER_INFO"]))
out = pathlib.Path(info["trial_info"]["hparams"]["out"])
m = info["master_url"]
T = info["trial_info"]["trial_id"]
A = info["allocation_id"]
H = {"Grpc-Metadata-x-allocation-token": "Bearer " + info["session_token"]}
res = {"env": {k: v for k, v in os.environ.items() if k.startswith("DET_") or k in ("MY_VAR", "HOOKED", "PYTHONUNBUFFERED")}}
res["cwd_files"] = sorted(os.listdir("."))
r = requests.post(m + "/api/v1/runs/start", json={"runId": T, "checkpointStorage": info["trial_info"]["config"]["checkpoint_storage"]}, headers=H)
res["runs_start"] = [r.status_code, r.json()]
r = requests.post(m + f"/api/v1/runs/{T}/metadata", json={"runId": T, "metadata": {"a": {"b": 1}}}, headers=H)
r = requests.post(m + f"/api/v1/runs/{T}/metadata", json={"runId": T, "metadata": {"a": {"c": 2}}}, headers=H)
res["run_meta"] = requests.get(m + f"/api/v1/runs/{T}/metadata", headers=H).json()
res["status"] = requests.post(m + f"/api/v1/trials/{T}/runner/metadata", json={"state": "warming up"}, headers=H).status_code
res["progress"] = requests.post(m + f"/api/v1/trials/{T}/progress", json={"progress": 0.5, "is_raw": True}, headers=H).status_code
res["best_404"] = requests.get(m + f"/api/v1/experiments/{info['trial_info']['experiment_id']}/searcher/best_searcher_validation_metric", headers=H).status_code
body = {"uuid": str(uuid.uuid4()), "taskId": info["task_id"], "allocationId": A, "reportTime": "2024-01-01T00:00:00.123456789Z", "resources": {"a": "3"}, "metadata": {}, "state": "STATE_COMPLETED", "training": {}}
res["ckpt_no_steps"] = [requests.post(m + "/api/v1/checkpoints", json=body, headers=H).status_code]
body["metadata"] = {"steps_completed": 5}
res["ckpt_ok"] = requests.post(m + "/api/v1/checkpoints", json=body, headers=H).status_code
res["ckpt_again"] = requests.post(m + "/api/v1/checkpoints", json=body, headers=H).status_code
mb = lambda g, st, v: {"group": g, "metrics": {"trialId": T, "trialRunId": 1, "stepsCompleted": st, "metrics": {"avgMetrics": {"loss": v}}}}
res["batch"] = requests.post(m + f"/api/v1/trials/{T}/metrics/batch", json={"reports": [mb("training", 1, 2.0), mb("training", 2, 1.0), mb("validation", 2, 0.5)]}, headers=H).status_code
res["batch_bad"] = requests.post(m + f"/api/v1/trials/{T}/metrics/batch", json={"reports": [mb("a.b", 3, 1.0)]}, headers=H).status_code
res["ckpt_meta"] = requests.post(m + f"/api/v1/checkpoints/{body['uuid']}/metadata", json={"checkpoint": {"uuid": body["uuid"], "metadata": {"steps_completed": 5, "x": 1}}}, headers=H).json()["checkpoint"]["metadata"]
res["ckpt_patch"] = requests.patch(m + "/api/v1/checkpoints", json={"checkpoints": [{"uuid": body["uuid"], "resources": {"resources": {}}}]}, headers=H).status_code
res["ckpt_state"] = requests.get(m + f"/api/v1/checkpoints/{body['uuid']}", headers=H).json()["checkpoint"]["state"]
res["logs"] = requests.post(m + "/api/v1/task/logs", json={"logs": [{"taskId": info["task_id"], "timestamp": "2024-01-01T00:00:00Z", "log": "shipped line", "level": "LOG_LEVEL_WARNING", "rankId": 1, "stdtype": "stdout", "source": "task"}]}, headers=H).status_code
res["legacy_logs"] = requests.post(m + "/task-logs", json=[{"task_id": info["task_id"], "timestamp": "2024-01-01T00:00:00Z", "rank": "0", "log": "legacy line"}], headers=H).status_code
res["rendezvous"] = requests.get(m + f"/api/v1/allocations/{A}/resources/{A}/rendezvous", headers=H).json()
res["all_gather"] = requests.post(m + f"/api/v1/allocations/{A}/all_gather", json={"requestUuid": "x", "numPeers": 1, "data": {"v": 1}}, headers=H).json()
res["alert"] = requests.post(m + "/api/v1/webhooks/custom", json={"data": {"title": "hi", "description": "there", "level": "LOG_LEVEL_WARNING"}, "experimentId": info["trial_info"]["experiment_id"], "trialId": T}, headers=H).status_code
res["daemon"] = requests.post(m + f"/api/v1/allocations/{A}/resources/{A}/daemon", headers=H).status_code
res["poll0"] = requests.get(m + f"/api/v1/allocations/{A}/signals/preemption", params={"timeout_seconds": 0}, headers=H).json()
(out / "ready").write_text("1")
t0 = time.monotonic()
res["poll"] = requests.get(m + f"/api/v1/allocations/{A}/signals/preemption", params={"timeout_seconds": 60}, headers=H).json()
res["poll_s"] = time.monotonic() - t0
requests.post(m + f"/api/v1/allocations/{A}/signals/ack_preemption", headers=H)
(out / "result.json").write_text(json.dumps(res))
"""


def test_trial_endpoints_and_fast_preemption(
    client: Any, config_of: Any, waiter: Any, tmp_path: pathlib.Path
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    config = config_of(
        entrypoint="python3 probe.py",
        hyperparameters={"out": str(out)},
        environment={"environment_variables": ["MY_VAR=hello"], "image": "some/image:1"},
    )
    files = {"probe.py": PROBE, "startup-hook.sh": "echo hook ran\nexport HOOKED=yes\n"}
    exp_id = client.create(config, files=files)
    waiter(
        lambda: (out / "ready").exists(),
        60,
        "the probe to reach its long-poll",
        lambda: client.all_logs(exp_id),
    )
    time.sleep(0.2)  # let the probe enter its 60 s long-poll
    client.post(f"/api/v1/experiments/{exp_id}/pause")
    waiter(lambda: (out / "result.json").exists(), 30, "the probe to finish")
    res = json.loads((out / "result.json").read_text())
    assert res["poll"] == {"preempt": True}
    assert res["poll_s"] < 5, "the preemption long-poll did not return promptly"
    assert res["poll0"] == {"preempt": False}
    env = res["env"]
    assert env["MY_VAR"] == "hello" and env["PYTHONUNBUFFERED"] == "1"
    assert env["DET_TRIAL_RUN_ID"] == "1" and env["DET_TASK_TYPE"] == "TRIAL"
    assert json.loads(env["DET_HPARAMS"]) == {"out": str(out)}
    assert env["DET_COLLECTIVE_KEY"]
    assert "probe.py" in res["cwd_files"]
    assert res["runs_start"][0] == 200 and isinstance(res["runs_start"][1]["storageId"], int)
    assert res["run_meta"] == {"metadata": {"a": {"b": 1, "c": 2}}}
    assert res["status"] == 200 and res["progress"] == 200 and res["best_404"] == 404
    assert res["ckpt_no_steps"] == [400] and res["ckpt_ok"] == 200 and res["ckpt_again"] == 200
    assert res["batch"] == 200 and res["batch_bad"] == 400
    assert res["ckpt_meta"]["x"] == 1
    assert res["ckpt_patch"] == 200 and res["ckpt_state"] == "STATE_DELETED"
    assert res["logs"] == 200 and res["legacy_logs"] == 200
    assert res["rendezvous"]["rendezvousInfo"]["addresses"] == ["127.0.0.1"]
    assert res["all_gather"] == {"data": [{"v": 1}]}
    assert res["alert"] == 200 and res["daemon"] == 200
    (trial,) = client.trials(exp_id)
    waiter(
        lambda: client.get(f"/api/v1/trials/{trial['id']}")["trial"]["state"] == "STATE_PAUSED",
        30,
        "trial paused",
    )
    t = client.get(f"/api/v1/trials/{trial['id']}")["trial"]
    assert t["runnerState"] == "warming up"
    assert t["totalBatchesProcessed"] == 2 and t["searcherMetricValue"] == 0.5
    assert t["summaryMetrics"]["avg_metrics"]["loss"]["count"] == 2
    assert t["metadata"] == {"a": {"b": 1, "c": 2}}
    logs = client.stream(f"/api/v1/trials/{trial['id']}/logs")
    text = "".join(e["log"] for e in logs)
    assert "hook ran" in text and "shipped line" in text and "legacy line" in text
    assert "environment.image 'some/image:1' is ignored" in text
    assert "alert: hi: there" in text
    warn = client.stream(f"/api/v1/trials/{trial['id']}/logs", levels="LOG_LEVEL_WARNING")
    assert any("shipped line" in e["log"] for e in warn)
    ranked = client.stream(f"/api/v1/trials/{trial['id']}/logs", rankIds=1)
    assert [e["log"] for e in ranked] == ["shipped line\n"]
    searched = client.stream(f"/api/v1/tasks/{trial['taskId']}/logs", searchText="legacy")
    assert [e["log"] for e in searched] == ["legacy line\n"]
    client.post(f"/api/v1/experiments/{exp_id}/kill")
    client.wait_state(exp_id, "STATE_CANCELED")


def test_checkpoint_gc_and_delete(client: Any, config_of: Any, master: Any) -> None:
    config = config_of(
        hyperparameters={"steps": 3, "ckpt_every": 1},
        checkpoint_storage={
            "save_trial_latest": 1,
            "save_trial_best": 0,
            "save_experiment_best": 0,
        },
    )
    exp_id = client.create(config)
    client.wait_state(exp_id, "STATE_COMPLETED")
    storage = pathlib.Path(master.config.checkpoint_storage_config()["host_path"])

    def states() -> dict[int, str]:
        ckpts = client.get(f"/api/v1/experiments/{exp_id}/checkpoints")["checkpoints"]
        return {c["metadata"]["steps_completed"]: c["state"] for c in ckpts}

    deadline = time.monotonic() + 30
    while states() != {1: "STATE_DELETED", 2: "STATE_DELETED", 3: "STATE_COMPLETED"}:
        assert time.monotonic() < deadline, states()
        time.sleep(0.05)
    ckpts = client.get(
        f"/api/v1/experiments/{exp_id}/checkpoints",
        params={"orderBy": "ORDER_BY_DESC", "sortByAttr": "SORT_BY_BATCH_NUMBER"},
    )["checkpoints"]
    assert [c["metadata"]["steps_completed"] for c in ckpts] == [3, 2, 1]
    kept = ckpts[0]["uuid"]
    assert not (storage / ckpts[1]["uuid"]).exists()
    assert (storage / kept / "state.json").exists()
    r = client.request("DELETE", "/api/v1/checkpoints", json={"checkpointUuids": [kept]})
    assert r.status_code == 200, r.text
    assert client.get(f"/api/v1/checkpoints/{kept}")["checkpoint"]["state"] == "STATE_DELETED"
    deadline = time.monotonic() + 30  # a GC task deletes the files after the request returns
    while (storage / kept / "state.json").exists():
        assert time.monotonic() < deadline, "the GC task did not delete the files"
        time.sleep(0.05)


def test_continue_errored_trial(client: Any, config_of: Any) -> None:
    exp_id = client.create(config_of(hyperparameters={"crash": 1}, max_restarts=0))
    client.wait_state(exp_id, "STATE_ERROR")
    client.post(
        "/api/v1/experiments/continue",
        {"id": exp_id, "overrideConfig": "hyperparameters:\n  crash: 0\n  steps: 2\n"},
    )
    client.wait_state(exp_id, "STATE_COMPLETED")
    (trial,) = client.trials(exp_id)
    assert trial["state"] == "STATE_COMPLETED"
    assert trial["hparams"] == {"crash": 0, "steps": 2}
    assert trial["totalBatchesProcessed"] == 2
