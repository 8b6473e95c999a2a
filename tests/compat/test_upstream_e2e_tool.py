"""tools/upstream_e2e.sh's argument handling, and two things upstream's e2e helpers read from a master.

The script itself runs upstream Determined's e2e_tests by hand (CI has no copy of Determined); here only
its refusals are checked, plus what its first runs found missing: an ACTIVE experiment reads as
STATE_RUNNING once its trial runs, the older ``GET /tasks`` lists the trial by its experiment, and
upstream's bulk experiment actions (by ids or by filters).
"""

from __future__ import annotations

import json
import pathlib
import subprocess
from typing import Any

import pytest
import requests

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tools" / "upstream_e2e.sh"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=60, cwd=ROOT
    )


def test_script_help_and_refusals(tmp_path: pathlib.Path) -> None:
    assert subprocess.run(["bash", "-n", str(SCRIPT)], timeout=30).returncode == 0
    shown = _run("--help")
    assert shown.returncode == 0 and "DETERMINED_CHECKOUT" in shown.stdout, shown
    cases = [
        ((), "missing DETERMINED_CHECKOUT"),
        ((str(tmp_path / "nowhere"),), "no such directory"),
        ((str(tmp_path),), "not a Determined checkout"),
        (("--slots", "0", str(tmp_path)), "--slots must be a positive whole number"),
        (("--bogus", str(tmp_path)), "unknown option --bogus"),
    ]
    for args, message in cases:
        refused = _run(*args)
        assert refused.returncode == 2, (args, refused)
        assert message in refused.stderr, (args, refused.stderr)


@pytest.mark.e2e
def test_running_experiment_and_legacy_tasks(sqlite_master: Any, tmp_path: pathlib.Path) -> None:
    (tmp_path / "sleep.py").write_text("import time\nwhile True:\n    time.sleep(1)\n")
    api = sqlite_master.api()
    config = {
        "name": "sleeper",
        "entrypoint": "python3 sleep.py",
        "searcher": {"name": "single", "metric": "loss", "max_length": {"batches": 1}},
        "max_restarts": 0,
    }
    exp_id = api.create_experiment(config, tmp_path)
    api.wait_for(
        lambda: api.experiment(exp_id)["state"] == "STATE_RUNNING", 120, "the experiment RUNNING"
    )
    tasks = api.get("/tasks")
    mine = [t for t in tasks.values() if f"(Experiment {exp_id})" in t["name"]]
    assert len(mine) == 1 and mine[0]["resources"] and mine[0]["slots_needed"] == 1, tasks
    # Log fields (upstream's TrialLogsFields): every value is a filter that finds lines.
    trial_id = api.trials(exp_id)[0]["id"]
    auth = {"Authorization": f"Bearer {sqlite_master.login('determined')}"}
    base = f"{sqlite_master.url}/api/v1/trials/{trial_id}/logs"

    def lines(url: str, **params: Any) -> list[dict[str, Any]]:
        answer = requests.get(url, params=params, headers=auth, timeout=60)
        assert answer.status_code == 200, answer.text
        return [json.loads(line)["result"] for line in answer.text.splitlines() if line]

    (fields,) = lines(base + "/fields")
    assert fields["sources"], fields
    for name, values in fields.items():
        for value in values[:1]:
            assert lines(base, **{name: value}), (name, value)
    assert lines(base, rankIds=-1) and not lines(base, rankIds=-2)
    # Upstream's bulk actions: by ids (an unknown id gets its own error), and by a name filter.
    bulk = "/api/v1/projects/1/experiments"
    archived = api.post(f"{bulk}/archive", {"experimentIds": [exp_id]})["results"]
    assert archived[0]["id"] == exp_id and "terminal" in archived[0]["error"], archived
    killed = api.post(f"{bulk}/kill", {"filters": {"name": "sleeper"}})["results"]
    assert killed == [{"id": exp_id, "error": ""}], killed
    api.wait_for(
        lambda: api.experiment(exp_id)["state"] == "STATE_CANCELED", 120, "the experiment killed"
    )
    assert not api.get("/tasks")
    archived = api.post(f"{bulk}/archive", {"experimentIds": [exp_id, 999]})["results"]
    assert archived[0] == {"id": exp_id, "error": ""} and archived[1]["error"], archived
    assert api.experiment(exp_id)["archived"] is True
    everything = api.get("/api/v1/experiments", limit=-1)  # upstream's "no limit"
    assert [e["id"] for e in everything["experiments"]] == [exp_id], everything
    with pytest.raises(Exception, match="experimentIds"):
        api.post(f"{bulk}/pause", {"experimentIds": "all"})


def test_users_agent_user_group(sqlite_master: Any) -> None:
    admin = sqlite_master.api("admin")
    link = {"agentUid": 1000, "agentGid": 1001, "agentUser": "someone", "agentGroup": "some"}
    body = {"user": {"username": "linked", "active": True, "agentUserGroup": link}, "password": ""}
    created = admin.post("/api/v1/users", body)["user"]
    assert created["agentUserGroup"] == link, created
    plain = admin.post("/api/v1/users", {"user": {"username": "plain"}, "password": ""})["user"]
    assert plain["agentUserGroup"] is None
    with pytest.raises(Exception, match="agentUser"):
        admin.post(
            "/api/v1/users", {"user": {"username": "half", "agentUserGroup": {"agentUid": 1}}}
        )
    relinked = {**link, "agentUser": "other"}
    admin.session.request(
        "PATCH", f"/api/v1/users/{plain['id']}", body={"agentUserGroup": relinked}
    )
    assert admin.get(f"/api/v1/users/{plain['id']}")["user"]["agentUserGroup"] == relinked
    for taken in ("Admin", "LINKED"):  # upstream's display-name rules
        with pytest.raises(Exception, match="displayName"):
            admin.session.request(
                "PATCH", f"/api/v1/users/{plain['id']}", body={"displayName": taken}
            )
