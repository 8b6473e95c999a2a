"""Experiment ``log_policies`` against a real master and real trial processes.

Each trial is a plain Python script that prints one line and exits with code 7, as upstream's noop
``Exit(7)`` does. A ``cancel_retries`` match ends the trial in ERROR without a restart; an
``exclude_node`` match keeps the restart off this machine's only node, so the trial errors after
one restart (upstream's single-agent behaviour with ``launch_error: true``); a named policy's name
is shown on the trial and on the run (``POST /api/v1/runs``) and survives a master restart.
"""

from __future__ import annotations

import json
import pathlib
import socket
from typing import Any

import pytest

from determined.client import APIError

LINE = "executing {'action': 'exit', 'code': 7}"
MATCH = r"executing.*action.*exit.*code.*7"
NO_MATCH = r"(.*) this should not match (.*)"
DONT_RETRY = "trial failed and matched logs to a don't retry policy"
EXCLUDED = "therefore will not schedule on"


@pytest.fixture(scope="module")
def api(module_master: Any) -> Any:
    return module_master.api()


@pytest.fixture(scope="module")
def context(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    directory = tmp_path_factory.mktemp("exit7")
    (directory / "exit7.py").write_text(f"import sys\nprint({LINE!r}, flush=True)\nsys.exit(7)\n")
    return directory


def _run(api: Any, context: pathlib.Path, policies: list[Any], max_restarts: int = 1) -> int:
    config = {
        "name": "log-policies",
        "entrypoint": "python3 exit7.py",
        "searcher": {"name": "single", "metric": "x", "max_length": 1},
        "max_restarts": max_restarts,
        "log_policies": policies,
    }
    exp_id = api.create_experiment(config, context)
    assert api.wait_experiment(exp_id, timeout=120) == "STATE_ERROR", api.debug(exp_id)
    return int(exp_id)


def _trial(api: Any, exp_id: int) -> tuple[dict[str, Any], str]:
    trials = api.trials(exp_id)
    assert len(trials) == 1
    return trials[0], "".join(api.logs(trials[0]["id"]))


def _search_run(api: Any, exp_id: int) -> dict[str, Any]:
    field = {
        "columnName": "experimentId",
        "kind": "field",
        "location": "LOCATION_TYPE_RUN",
        "operator": "=",
        "type": "COLUMN_TYPE_NUMBER",
        "value": exp_id,
    }
    root = {
        "filterGroup": {"children": [field], "conjunction": "and", "kind": "group"},
        "showArchived": False,
    }
    answer = api.post("/api/v1/runs", {"limit": 1, "filter": json.dumps(root)})
    assert answer["pagination"]["total"] == 1, answer
    return dict(answer["runs"][0])


@pytest.mark.parametrize("legacy", [True, False])
def test_cancel_retries_match_stops_the_restarts(
    api: Any, context: pathlib.Path, legacy: bool
) -> None:
    action: Any = {"type": "cancel_retries"} if legacy else "cancel_retries"
    policy = {"pattern": MATCH, "action": action}
    if not legacy:
        policy["name"] = "no retry"
    trial, logs = _trial(api, _run(api, context, [policy]))
    assert trial["restarts"] == 0, logs
    assert DONT_RETRY in logs
    assert f'(log "{LINE}" matched regex "{MATCH}")' in logs
    assert "Restarting trial" not in logs


def test_policies_are_read_from_the_masters_own_database(
    make_master: Any, context: pathlib.Path
) -> None:
    """Two masters in one process whose experiments get the same task id (experiment 1, the same
    seed: the default seed is the current second): each matches with its own experiment's policies
    (a CI run once saw the first master's cached policies applied by the second)."""
    seed = {"experiment_seed": 1234}
    tasks = []
    for pattern, restarts in ((NO_MATCH, 1), (MATCH, 0)):
        api = make_master().api()
        config = {
            "name": "log-policies",
            "entrypoint": "python3 exit7.py",
            "searcher": {"name": "single", "metric": "x", "max_length": 1},
            "max_restarts": 1,
            "reproducibility": seed,
            "log_policies": [{"pattern": pattern, "action": "cancel_retries"}],
        }
        exp_id = api.create_experiment(config, context)
        assert api.wait_experiment(exp_id, timeout=120) == "STATE_ERROR", api.debug(exp_id)
        trial, logs = _trial(api, int(exp_id))
        assert trial["restarts"] == restarts, logs
        tasks.append(trial["taskId"])
    assert tasks[0] == tasks[1]  # the case this test is about


def test_cancel_retries_without_a_match_restarts(api: Any, context: pathlib.Path) -> None:
    policy = {"pattern": NO_MATCH, "action": {"type": "cancel_retries"}}
    trial, logs = _trial(api, _run(api, context, [policy]))
    assert trial["restarts"] == 1, logs
    assert DONT_RETRY not in logs
    assert logs.count(LINE + "\n") == 2  # it ran twice


def test_exclude_node_leaves_no_node_on_a_single_agent(
    api: Any, context: pathlib.Path, module_master: Any
) -> None:
    policy = {"pattern": MATCH, "action": {"type": "exclude_node"}}
    trial, logs = _trial(api, _run(api, context, [policy], max_restarts=3))
    assert trial["restarts"] == 1, logs
    agents = api.get("/api/v1/agents")["agents"]
    assert len(agents) == 1
    assert agents[0]["id"] == socket.gethostname()
    assert f"{EXCLUDED} {agents[0]['id']}" in logs
    assert logs.count(LINE + "\n") == 1  # it never ran again
    admin = module_master.api("admin")
    assert admin.get("/api/v1/master/config")["config"]["launch_error"] is True


def test_exclude_node_without_a_match_restarts(api: Any, context: pathlib.Path) -> None:
    policy = {"pattern": NO_MATCH, "action": "exclude_node", "name": "bad node"}
    trial, logs = _trial(api, _run(api, context, [policy]))
    assert trial["restarts"] == 1, logs
    assert EXCLUDED not in logs
    assert trial["logPolicyMatched"] is None


@pytest.mark.parametrize("should_match", [True, False])
def test_the_matched_policy_name_is_shown(
    api: Any, context: pathlib.Path, should_match: bool
) -> None:
    policy = {"name": "Test", "pattern": MATCH if should_match else NO_MATCH}
    exp_id = _run(api, context, [policy], max_restarts=0)
    trial, logs = _trial(api, exp_id)
    run = _search_run(api, exp_id)
    assert run["id"] == trial["id"]
    assert run["experiment"]["id"] == exp_id
    assert run["state"] == "STATE_ERROR"
    expected = "Test" if should_match else None
    assert trial["logPolicyMatched"] == expected, logs
    assert run["logPolicyMatched"] == expected
    assert api.get(f"/api/v1/trials/{trial['id']}")["trial"]["logPolicyMatched"] == expected


def test_a_default_policy_that_matches_is_named(api: Any, tmp_path: pathlib.Path) -> None:
    (tmp_path / "oom.py").write_text(
        "import sys\nprint('RuntimeError: CUDA out of memory. Tried to allocate 2 GiB')\nsys.exit(1)\n"
    )
    config = {
        "entrypoint": "python3 oom.py",
        "searcher": {"name": "single", "metric": "x", "max_length": 1},
        "max_restarts": 0,
    }
    exp_id = api.create_experiment(config, tmp_path)
    assert api.wait_experiment(exp_id, timeout=120) == "STATE_ERROR"
    assert api.trials(exp_id)[0]["logPolicyMatched"] == "CUDA OOM"


@pytest.mark.parametrize(
    "policies, message",
    [
        ([{"pattern": "(unclosed", "action": "cancel_retries"}], "log_policies[0].pattern"),
        ([{"pattern": "x", "action": "reboot"}], "log_policies[0].action"),
        ([{"pattern": "x"}], "log_policies[0].action: required when name is not set"),
        ([{"action": {"type": "exclude_node"}}], "log_policies[0].pattern"),
        ("cancel_retries", "log_policies"),
    ],
)
def test_a_bad_policy_is_refused_naming_the_field(
    api: Any, context: pathlib.Path, policies: Any, message: str
) -> None:
    config = {
        "entrypoint": "python3 exit7.py",
        "searcher": {"name": "single", "metric": "x", "max_length": 1},
        "log_policies": policies,
    }
    with pytest.raises(APIError) as raised:
        api.create_experiment(config, context)
    assert 400 <= raised.value.status < 500
    assert message in str(raised.value)


def test_a_bad_run_filter_is_refused_naming_the_field(api: Any) -> None:
    bad = {
        "filterGroup": {
            "kind": "group",
            "conjunction": "and",
            "children": [
                {"kind": "field", "columnName": "nope", "location": "LOCATION_TYPE_RUN",
                 "operator": "=", "value": 1}
            ],
        }
    }  # fmt: skip
    for body, field in [
        ({"filter": json.dumps(bad)}, "filter.filterGroup.children[0].columnName"),
        ({"filter": "{not json"}, "filter"),
        ({"sort": "id=sideways"}, "sort[0]"),
        ({"limit": -1}, "limit"),
    ]:
        with pytest.raises(APIError) as raised:
            api.post("/api/v1/runs", body)
        assert raised.value.status == 400, body
        assert field in str(raised.value)


def test_the_matched_name_survives_a_master_restart(master: Any, context: pathlib.Path) -> None:
    """On SQLite and PostgreSQL (migration 0011 on both)."""
    api = master.api()
    exp_id = _run(api, context, [{"name": "kept", "pattern": MATCH}], max_restarts=0)
    master.restart()
    api = master.api()
    assert api.trials(exp_id)[0]["logPolicyMatched"] == "kept"
    assert _search_run(api, exp_id)["logPolicyMatched"] == "kept"


def test_runs_search_filters_and_sorts(api: Any, context: pathlib.Path) -> None:
    first = _run(api, context, [{"name": "a", "pattern": MATCH}], max_restarts=0)
    second = _run(api, context, [{"name": "b", "pattern": NO_MATCH}], max_restarts=0)

    def field(column: str, operator: str, value: Any) -> dict[str, Any]:
        return {"kind": "field", "columnName": column, "location": "LOCATION_TYPE_RUN",
                "operator": operator, "value": value}  # fmt: skip

    either = {
        "kind": "group",
        "conjunction": "or",
        "children": [field("experimentId", "=", first), field("experimentId", "=", second)],
    }
    root = {
        "filterGroup": {
            "kind": "group",
            "conjunction": "and",
            "children": [either, field("experimentName", "contains", "log-pol")],
        }
    }
    answer = api.post("/api/v1/runs", {"filter": json.dumps(root), "sort": "experimentId=desc"})
    assert [r["experiment"]["id"] for r in answer["runs"]] == [second, first]
    assert [r["logPolicyMatched"] for r in answer["runs"]] == [None, "a"]
    root["filterGroup"]["children"].append(field("logPolicyMatched", "isEmpty", None))
    answer = api.post("/api/v1/runs", {"filter": json.dumps(root)})
    assert [r["experiment"]["id"] for r in answer["runs"]] == [second]
