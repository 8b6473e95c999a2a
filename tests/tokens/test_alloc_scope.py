"""A trial's allocation token reaches only its own trial; the owner's session it gets for SDK calls
(``DET_USER_TOKEN``) works everywhere the owner may go and is revoked when the trial ends.

A real trial process probes the master with its own credentials and writes the status codes it got;
the test then checks each one.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import requests
from e2e.harness import MasterAPI

PROBE = r"""
import json, os, pathlib, uuid
import requests

info = json.load(open(os.environ["DET_CLUSTER_INFO"]))
hp = info["trial_info"]["hparams"]
master = info["master_url"]
T, E = info["trial_info"]["trial_id"], info["trial_info"]["experiment_id"]
ALLOC, TASK = info["allocation_id"], info["task_id"]
ALLOC_H = {"Grpc-Metadata-x-allocation-token": "Bearer " + info["session_token"]}
BEARER_H = {"Authorization": "Bearer " + info["session_token"]}
USER_H = {"Authorization": "Bearer " + os.environ["DET_USER_TOKEN"]}
out = {"user_token": os.environ["DET_USER_TOKEN"], "alloc_token": info["session_token"]}

def code(method, path, headers=ALLOC_H, body=None):
    r = requests.request(method, master + path, json=body, headers=headers, timeout=60)
    return [r.status_code, r.text[:300]]

if hp.get("probe"):
    O, OE, OTASK = hp["other_trial"], hp["other_exp"], hp["other_task"]
    metrics = lambda t: {"group": "training", "metrics": {"trialId": t, "trialRunId": 1,
        "stepsCompleted": 1, "metrics": {"avgMetrics": {"loss": 1.0}}}}
    ckpt = lambda task: {"uuid": str(uuid.uuid4()), "taskId": task, "reportTime":
        "2024-01-01T00:00:00Z", "resources": {}, "metadata": {}, "state": "STATE_COMPLETED"}
    log = lambda task: {"logs": [{"taskId": task, "log": "hello\n", "timestamp": "2024-01-01T00:00:00Z"}]}
    out["own"] = {
        "get trial": code("GET", f"/api/v1/trials/{T}"),
        "get experiment": code("GET", f"/api/v1/experiments/{E}"),
        "experiment trials": code("GET", f"/api/v1/experiments/{E}/trials"),
        "report metrics": code("POST", f"/api/v1/trials/{T}/metrics", body=metrics(T)),
        "progress": code("POST", f"/api/v1/trials/{T}/progress", body={"progress": 0.5}),
        "task logs": code("POST", "/api/v1/task/logs", body=log(TASK)),
        "preemption": code("GET", f"/api/v1/allocations/{ALLOC}/signals/preemption?timeout_seconds=1"),
        "as bearer": code("GET", f"/api/v1/trials/{T}", headers=BEARER_H),
        "master info": code("GET", "/api/v1/master"),
    }
    out["other"] = {
        "get trial": code("GET", f"/api/v1/trials/{O}"),
        "report metrics": code("POST", f"/api/v1/trials/{O}/metrics", body=metrics(O)),
        "get experiment": code("GET", f"/api/v1/experiments/{OE}"),
        "experiment trials": code("GET", f"/api/v1/experiments/{OE}/trials"),
        "kill own experiment": code("POST", f"/api/v1/experiments/{E}/kill"),
        "list experiments": code("GET", "/api/v1/experiments"),
        "create token": code("POST", "/api/v1/tokens", body={"userId": 1}),
        "list users": code("GET", "/api/v1/users"),
        "other task logs": code("POST", "/api/v1/task/logs", body=log(OTASK)),
        "other checkpoint": code("POST", "/api/v1/checkpoints", body=ckpt(OTASK)),
        "other trial as bearer": code("GET", f"/api/v1/trials/{O}", headers=BEARER_H),
        "other allocation": code("GET", f"/api/v1/allocations/{OTASK}.1/signals/preemption?timeout_seconds=1"),
    }
    out["user"] = {
        "list experiments": code("GET", "/api/v1/experiments", headers=USER_H),
        "other trial": code("GET", f"/api/v1/trials/{O}", headers=USER_H),
    }
path = pathlib.Path(hp["out_dir"]) / f"trial-{T}.json"
path.write_text(json.dumps(out))
print("probe done", flush=True)
"""


def _config(**hparams: Any) -> dict[str, Any]:
    return {
        "name": "alloc-scope",
        "entrypoint": "python3 probe.py",
        "searcher": {"name": "single", "metric": "loss", "smaller_is_better": True},
        "hyperparameters": hparams,
        "max_restarts": 0,
        "resources": {"slots_per_trial": 1},
    }


@pytest.fixture(scope="module")
def probed(module_master: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Two experiments of user ``determined``: A's trial only records its tokens; B's trial probes
    its own and A's routes."""
    api = MasterAPI(module_master.url)
    context = tmp_path_factory.mktemp("probe-context")
    (context / "probe.py").write_text(PROBE)
    out_dir = tmp_path_factory.mktemp("probe-out")
    exp_a = api.create_experiment(_config(out_dir=str(out_dir)), context)
    trial_a = api.wait_for(lambda: api.trials(exp_a), 60, "experiment A's trial")[0]
    file_a = out_dir / f"trial-{trial_a['id']}.json"
    api.wait_for(file_a.exists, 120, "trial A's report")
    exp_b = api.create_experiment(
        _config(
            out_dir=str(out_dir),
            probe=True,
            other_trial=trial_a["id"],
            other_exp=exp_a,
            other_task=trial_a["taskId"],
        ),
        context,
    )
    trial_b = api.wait_for(lambda: api.trials(exp_b), 60, "experiment B's trial")[0]
    file_b = out_dir / f"trial-{trial_b['id']}.json"
    api.wait_for(file_b.exists, 120, "trial B's probes")
    for exp in (exp_a, exp_b):
        api.wait_experiment(exp)
    return {"a": json.loads(file_a.read_text()), "b": json.loads(file_b.read_text()), "api": api}


def test_own_trial_routes_work(probed: dict[str, Any]) -> None:
    own = probed["b"]["own"]
    assert {name: got[0] for name, got in own.items()} == {name: 200 for name in own}, own


def test_other_trials_and_other_routes_are_refused(probed: dict[str, Any]) -> None:
    other = probed["b"]["other"]
    assert {name: got[0] for name, got in other.items()} == {name: 403 for name in other}, other
    assert "allocation token" in other["get trial"][1]
    assert "allocation token" in other["list users"][1]


def test_owner_session_is_separate_and_revoked_at_the_end(
    probed: dict[str, Any], module_master: Any
) -> None:
    user = probed["b"]["user"]
    assert {name: got[0] for name, got in user.items()} == {name: 200 for name in user}, user
    # DET_USER_TOKEN is a session of its own, not the allocation token.
    for report in (probed["a"], probed["b"]):
        assert report["user_token"] != report["alloc_token"]
        # Both trials have ended: neither token works any more.
        for token in (report["user_token"], report["alloc_token"]):
            got = requests.get(
                module_master.url + "/api/v1/me",
                headers={"Authorization": f"Bearer {token}"},
                timeout=30,
            )
            assert got.status_code == 401, got.text


def test_core_api_trial_reports_through_its_token(probed: dict[str, Any]) -> None:
    """The metric report B sent with its allocation token landed on B's own trial."""
    api: MasterAPI = probed["api"]
    exp_b = api.get("/api/v1/experiments", limit=100)["experiments"][-1]["id"]
    trial_b = api.trials(exp_b)[0]["id"]
    assert api.metrics(trial_b, "training"), "the allowed metrics report is missing"
