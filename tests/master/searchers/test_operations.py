"""The searcher-operations routes on a real master, driven over HTTP with a user token.

The experiment is created paused, so its trials exist but never run: the test plays the trials'
part of the protocol itself, deterministically and without subprocesses.
"""

from __future__ import annotations

from typing import Any


def _op(client: Any, trial_id: int) -> int | None:
    answer = client.get(f"/api/v1/trials/{trial_id}/searcher/operation")
    if answer["completed"]:
        assert answer["op"] is None
        return None
    length = answer["op"]["validateAfter"]["length"]
    assert isinstance(length, str)  # protojson's 64-bit integers
    return int(length)


def _complete(client: Any, trial_id: int, body: dict[str, Any]) -> Any:
    return client.request(
        "POST", f"/api/v1/trials/{trial_id}/searcher/completed_operation", json=body
    )


def _done(client: Any, trial_id: int, length: Any, metric: Any) -> None:
    """Complete an operation; det's answer gives the next one (``nextOperation``), which must be
    what the trial's question right after gets."""
    r = _complete(client, trial_id, {"op": {"length": length}, "searcherMetric": metric})
    assert r.status_code == 200, r.text
    given = r.json().get("nextOperation")
    if given is not None:
        asked = client.get(f"/api/v1/trials/{trial_id}/searcher/operation")
        assert given == asked


def _paused(client: Any, config_of: Any, searcher: dict[str, Any]) -> tuple[int, list[int]]:
    exp_id = client.create(config_of(searcher=searcher), activate=False)
    return exp_id, [t["id"] for t in client.trials(exp_id)]


ASHA = {
    "name": "async_halving",
    "metric": "loss",
    "num_rungs": 2,
    "divisor": 2,
    "time_metric": "batches",
    "max_time": 8,
    "max_trials": 3,
    "max_concurrent_trials": 3,
}


def test_asha_hands_out_rungs_and_stops_losers(
    sqlite_master: Any, sqlite_client: Any, config_of: Any
) -> None:
    client = sqlite_client
    exp_id, (a, b, c) = _paused(client, config_of, ASHA)
    assert [_op(client, t) for t in (a, b, c)] == [4, 4, 4]
    _done(client, a, "4", 1.0)  # a string length, as protojson writes it
    assert _op(client, a) == 8  # best so far in rung 0: promoted
    _done(client, b, 4, 2.0)
    assert _op(client, b) is None  # keep = 1: stopped
    trial_b = client.get(f"/api/v1/trials/{b}")["trial"]
    assert trial_b["state"] == "STATE_COMPLETED"  # never ran, so it ends at once
    # c reported a validation at the rung length itself: the completed operation of the same
    # length must not be judged again (one entry per trial and rung)
    r = client.request(
        "POST",
        f"/api/v1/trials/{c}/metrics",
        json={
            "group": "validation",
            "metrics": {
                "trialRunId": 0,
                "stepsCompleted": 4,
                "metrics": {"avgMetrics": {"loss": 0.5, "batches": 4}},
            },
        },
    )
    assert r.status_code == 200, r.text
    _done(client, c, 4, 99.0)
    assert _op(client, c) == 8
    searcher = sqlite_master.manager.searchers[exp_id]
    rung0 = searcher.state_dict()["search_method_state"]["rungs"][0]["metrics"]
    assert sorted(m["metric"] for m in rung0) == [0.5, 1.0, 2.0]
    _done(client, a, {"length": 8, "unit": "UNIT_BATCHES"}, 0.25)  # the oldest body form
    _done(client, c, 8, 0.75)
    assert _op(client, a) is None and _op(client, c) is None
    _done(client, a, 8, 0.25)  # a late retry of a finished trial is harmless
    exp = client.wait_state(exp_id, "STATE_COMPLETED")
    assert len(client.trials(exp_id)) == 3
    assert exp["progress"] == 1.0


def test_a_completion_gives_the_next_operation(sqlite_client: Any, config_of: Any) -> None:
    """det's ``nextOperation``: promoted, stopped, and for a trial that completes an operation it
    never asked for (completing one puts it on the operations protocol, as asking does)."""
    client = sqlite_client
    _exp_id, (a, b, c) = _paused(client, config_of, ASHA)
    assert _op(client, a) == 4
    promoted = _complete(client, a, {"op": {"length": 4}, "searcherMetric": 1.0}).json()
    assert promoted["nextOperation"] == {
        "op": {"validateAfter": {"length": "8"}},
        "completed": False,
    }
    assert _op(client, b) == 4
    stopped = _complete(client, b, {"op": {"length": 4}, "searcherMetric": 2.0}).json()
    assert stopped["nextOperation"] == {"op": None, "completed": True}
    unasked = _complete(client, c, {"op": {"length": 4}, "searcherMetric": 0.5}).json()
    assert unasked["nextOperation"]["op"]["validateAfter"]["length"] == "8"
    assert [_op(client, t) for t in (a, b, c)] == [8, None, 8]


def test_the_protocol_survives_a_restart(
    make_master: Any, sqlite_url: str, client_for: Any, config_of: Any
) -> None:
    master = make_master(sqlite_url)
    client = client_for(master.url)
    exp_id, (a, _b, _c) = _paused(client, config_of, ASHA)
    assert _op(client, a) == 4
    _done(client, a, 4, 1.0)
    master.stop()
    client = client_for(make_master(sqlite_url).url)
    assert _op(client, a) == 8
    state = client.get(f"/api/v1/experiments/{exp_id}")["experiment"]["state"]
    assert state == "STATE_PAUSED"


def test_full_length_searchers_hand_out_one_operation(sqlite_client: Any, config_of: Any) -> None:
    client = sqlite_client
    searcher = {"name": "random", "metric": "loss", "max_trials": 1, "max_length": {"batches": 5}}
    _exp_id, (trial,) = _paused(client, config_of, searcher)
    assert _op(client, trial) == 5
    _done(client, trial, 5, 0.1)
    assert _op(client, trial) is None


def test_no_training_length_is_a_clear_400(sqlite_client: Any, config_of: Any) -> None:
    client = sqlite_client
    _exp_id, (trial,) = _paused(client, config_of, {"name": "single", "metric": "loss"})
    r = client.request("GET", f"/api/v1/trials/{trial}/searcher/operation")
    assert r.status_code == 400
    assert "searcher.max_length" in r.json()["error"]["error"]
    # A completion is still heard; the next operation is the question's to refuse.
    r = _complete(client, trial, {"op": {"length": 5}, "searcherMetric": 0.5})
    assert r.status_code == 200 and r.json() == {}, r.text


BAD_COMPLETIONS = [
    ({"searcherMetric": 1.0}, "op: required"),
    ({"op": {"length": "ten"}, "searcherMetric": 1.0}, "op.length: must be an integer"),
    ({"op": {"length": 0}, "searcherMetric": 1.0}, "op.length: must be a positive"),
    ({"op": {"validateAfter": {"length": 4}}}, "searcherMetric: required"),
    ({"op": {"length": 4}, "searcherMetric": "NaN"}, "searcherMetric: must be a number"),
    ({"op": {"length": 4}, "searcherMetric": True}, "searcherMetric: must be a number"),
]


def test_bad_completions_name_the_field(sqlite_client: Any, config_of: Any) -> None:
    _exp_id, trials = _paused(sqlite_client, config_of, ASHA)
    for body, message in BAD_COMPLETIONS:
        r = _complete(sqlite_client, trials[0], body)
        assert r.status_code == 400 and message in r.json()["error"]["error"], r.text
    assert _op(sqlite_client, trials[0]) == 4  # nothing was judged


def test_unknown_trial_and_no_token(sqlite_client: Any) -> None:
    r = sqlite_client.request("GET", "/api/v1/trials/999/searcher/operation")
    assert r.status_code == 404
    import requests

    r = requests.get(f"{sqlite_client.url}/api/v1/trials/1/searcher/operation", timeout=30)
    assert r.status_code == 401


def test_a_continued_experiment_hands_out_one_full_length_operation(
    sqlite_master: Any, sqlite_client: Any, config_of: Any
) -> None:
    """Trials of an experiment re-run by ``continue`` bypass the searcher: one operation of the
    searcher's whole length, asked as often as the trial likes, then none once it is reported."""
    client = sqlite_client
    exp_id, (a, b, _c) = _paused(client, config_of, ASHA)
    assert _op(client, b) == 4  # the searcher's answer, before the re-run
    sqlite_master.manager.searcher_states.set_continued(exp_id, True)
    assert [_op(client, a), _op(client, a), _op(client, b)] == [8, 8, 8]
    _done(client, a, 8, 0.5)
    assert _op(client, a) is None and _op(client, b) == 8
    sqlite_master.manager.searcher_states.set_continued(exp_id, False)
    assert _op(client, b) == 4  # the searcher again
