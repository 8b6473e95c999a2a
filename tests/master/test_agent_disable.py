"""Enabling, disabling and draining agents and slots (``POST /api/v1/agents/{id}/enable|disable``,
``.../slots/{id}/enable|disable``): the scheduler's rules, then a real master with real trial and
command processes on one CPU slot."""

from __future__ import annotations

import json
import pathlib
import time
from collections.abc import Callable
from typing import Any

import pytest
import requests

from determined.master.rm import AllocationRequest, PriorityScheduler

# ---- the scheduler ---------------------------------------------------------------------------------


def _request(aid: str, slots: int) -> AllocationRequest:
    return AllocationRequest(allocation_id=aid, task_id=aid, job_id=f"job-{aid}", slots=slots)


def test_scheduler_gives_no_disabled_slot_and_waits_instead_of_refusing() -> None:
    scheduler = PriorityScheduler(2)
    scheduler.set_disabled([0])
    scheduler.submit(_request("two", 2))
    scheduler.submit(_request("one", 1))
    starts = scheduler.schedule()
    assert [(s.request.allocation_id, s.slot_ids) for s in starts] == [("one", [1])]
    assert scheduler.unschedulable_reason(_request("x", 2)) is None
    scheduler.release("one")
    assert scheduler.schedule() == []
    scheduler.set_disabled()
    assert [(s.request.allocation_id, s.slot_ids) for s in scheduler.schedule()] == [
        ("two", [0, 1])
    ]


def test_scheduler_disabled_node_starts_nothing_not_even_zero_slot_requests() -> None:
    scheduler = PriorityScheduler(1)
    scheduler.set_disabled(node=True)
    scheduler.submit(_request("cpu-task", 0))
    scheduler.submit(_request("trial", 1))
    assert scheduler.schedule() == []
    assert scheduler.free_slots() == []
    scheduler.set_disabled([0])  # the node back, its one slot still off: 0-slot work starts
    assert [s.request.allocation_id for s in scheduler.schedule()] == ["cpu-task"]
    scheduler.set_disabled()
    assert [s.request.allocation_id for s in scheduler.schedule()] == ["trial"]


# ---- a real master -----------------------------------------------------------------------------


class Api:
    """A logged-in client that returns the response, whatever its status."""

    def __init__(self, url: str, username: str = "admin") -> None:
        self.url = url
        self.http = requests.Session()
        r = self.http.post(
            url + "/api/v1/auth/login", json={"username": username, "password": ""}, timeout=30
        )
        assert r.status_code == 200, r.text
        self.http.headers["Authorization"] = "Bearer " + r.json()["token"]

    def call(self, method: str, path: str, body: Any = None) -> requests.Response:
        return self.http.request(method, self.url + path, json=body, timeout=60)

    def ok(self, method: str, path: str, body: Any = None) -> Any:
        r = self.call(method, path, body)
        assert r.status_code == 200, f"{method} {path}: {r.status_code} {r.text}"
        return r.json()

    def agent(self) -> dict[str, Any]:
        (agent,) = self.ok("GET", "/api/v1/agents")["agents"]
        return agent  # type: ignore[no-any-return]

    def experiment(self, exp_id: int) -> dict[str, Any]:
        return self.ok("GET", f"/api/v1/experiments/{exp_id}")["experiment"]  # type: ignore[no-any-return]

    def trial(self, exp_id: int) -> dict[str, Any]:
        (trial,) = self.ok("GET", f"/api/v1/experiments/{exp_id}/trials")["trials"]
        return trial  # type: ignore[no-any-return]

    def logs(self, trial_id: int) -> str:
        r = self.http.get(f"{self.url}/api/v1/trials/{trial_id}/logs", timeout=60)
        assert r.status_code == 200, r.text
        return "".join(json.loads(line)["result"]["log"] for line in r.iter_lines() if line)

    def command(self, command_id: str) -> dict[str, Any]:
        return self.ok("GET", f"/api/v1/commands/{command_id}")["command"]  # type: ignore[no-any-return]

    def launch_command(self, entrypoint: str, slots: int = 0) -> str:
        body = {"config": {"entrypoint": entrypoint, "resources": {"slots": slots}}}
        return str(self.ok("POST", "/api/v1/commands", body)["command"]["id"])


def _stays(predicate: Callable[[], bool], seconds: float, what: str) -> None:
    """Assert ``predicate`` holds on every check for ``seconds`` (a state that must not change)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert predicate(), what
        time.sleep(0.1)


WAIT_SCRIPT = """
import pathlib, sys, time
here = pathlib.Path({marker!r})
here.write_text("started")
deadline = time.time() + 120
while not pathlib.Path({go!r}).exists() and time.time() < deadline:
    time.sleep(0.05)
sys.exit(0 if pathlib.Path({go!r}).exists() else 5)
"""


def _create(admin: Api, config: dict[str, Any], files: list[dict[str, Any]]) -> int:
    body = {"config": json.dumps(config), "modelDefinition": files, "activate": True}
    return int(admin.ok("POST", "/api/v1/experiments", body)["experiment"]["id"])


@pytest.fixture
def one_slot(make_master: Any, sqlite_url: str) -> Any:
    return make_master(sqlite_url, slots=1)


def test_disabled_slot_queues_work_and_the_switch_survives_a_restart(
    make_master: Any, db_url: str, config_of: Any, waiter: Any, files_of: Any, trial_script: str
) -> None:
    one_slot = make_master(db_url, slots=1)  # SQLite, then PostgreSQL
    admin = Api(one_slot.url)
    agent = admin.agent()
    agent_id = agent["id"]
    assert agent["enabled"] is True and agent["slots"]["0"]["enabled"] is True

    slot = admin.ok("POST", f"/api/v1/agents/{agent_id}/slots/0/disable", {})["slot"]
    assert slot["enabled"] is False and slot["draining"] is False
    assert admin.ok("GET", f"/api/v1/agents/{agent_id}/slots/0")["slot"]["enabled"] is False
    assert admin.agent()["slotStats"]["typeStats"]["TYPE_CPU"]["disabled"] == 1

    one_slot.restart()
    admin = Api(one_slot.url)
    assert admin.ok("GET", f"/api/v1/agents/{agent_id}/slots/0")["slot"]["enabled"] is False
    assert admin.agent()["enabled"] is True  # only the slot was switched

    exp_id = _create(admin, config_of(), files_of({"trial.py": trial_script}))
    waiter(lambda: admin.experiment(exp_id)["state"] == "STATE_QUEUED", 30, "the experiment")
    # A CPU-only command still runs on the agent: a scheduling pass after the experiment was
    # queued, which left the trial waiting for the disabled slot.
    command_id = admin.launch_command("true")
    waiter(lambda: admin.command(command_id)["state"] == "STATE_TERMINATED", 60, "the command")
    assert admin.experiment(exp_id)["state"] == "STATE_QUEUED"
    assert admin.agent()["slots"]["0"]["container"] is None

    slot = admin.ok("POST", f"/api/v1/agents/{agent_id}/slots/0/enable")["slot"]
    assert slot["enabled"] is True
    waiter(lambda: admin.experiment(exp_id)["state"] == "STATE_COMPLETED", 60, "the experiment")


def test_disable_agent_kills_the_trial_which_resumes_from_its_checkpoint_once_enabled(
    one_slot: Any,
    config_of: Any,
    waiter: Any,
    files_of: Any,
    trial_script: str,
    tmp_path: pathlib.Path,
) -> None:
    admin = Api(one_slot.url)
    agent_id = admin.agent()["id"]
    hang = tmp_path / "hung"
    config = config_of(hyperparameters={"steps": 4, "hang_once": str(hang)}, max_restarts=0)
    exp_id = _create(admin, config, files_of({"trial.py": trial_script}))
    waiter(hang.exists, 60, "the trial to checkpoint step 2 and hang")
    trial_id = admin.trial(exp_id)["id"]

    agent = admin.ok("POST", f"/api/v1/agents/{agent_id}/disable")["agent"]
    assert agent["enabled"] is False and agent["draining"] is False
    assert agent["slots"]["0"]["enabled"] is False
    waiter(lambda: admin.agent()["slots"]["0"]["container"] is None, 30, "the slot to be freed")
    waiter(
        lambda: "its agent or slot was disabled" in admin.logs(trial_id), 30, "the kill in the logs"
    )
    waiter(lambda: admin.experiment(exp_id)["state"] == "STATE_QUEUED", 30, "the trial requeued")
    trial = admin.trial(exp_id)
    assert trial["state"] == "STATE_ACTIVE" and trial["restarts"] == 0

    # A disabled agent runs nothing, CPU-only tasks included.
    command_id = admin.launch_command("true")
    _stays(
        lambda: (
            admin.command(command_id)["state"] == "STATE_QUEUED"
            and admin.experiment(exp_id)["state"] == "STATE_QUEUED"
        ),
        2,
        "work started on a disabled agent",
    )

    assert admin.ok("POST", f"/api/v1/agents/{agent_id}/enable")["agent"]["enabled"] is True
    waiter(lambda: admin.experiment(exp_id)["state"] == "STATE_COMPLETED", 60, "the experiment")
    trial = admin.trial(exp_id)
    assert trial["restarts"] == 0 and trial["totalBatchesProcessed"] == 4
    assert "starting at step 2" in admin.logs(trial_id)
    waiter(lambda: admin.command(command_id)["state"] == "STATE_TERMINATED", 60, "the command")


def test_disable_agent_stops_a_running_zero_slot_command(one_slot: Any, waiter: Any) -> None:
    admin = Api(one_slot.url)
    agent_id = admin.agent()["id"]
    command_id = admin.launch_command("sleep 120")
    waiter(lambda: admin.command(command_id)["state"] == "STATE_RUNNING", 60, "the command")
    admin.ok("POST", f"/api/v1/agents/{agent_id}/disable", {"drain": False})
    waiter(lambda: admin.command(command_id)["state"] == "STATE_TERMINATED", 30, "the command")
    assert "agent" in admin.command(command_id).get("exitStatus", "")
    admin.ok("POST", f"/api/v1/agents/{agent_id}/enable")


def test_drain_lets_running_work_finish_and_starts_nothing_new(
    one_slot: Any,
    config_of: Any,
    waiter: Any,
    files_of: Any,
    trial_script: str,
    tmp_path: pathlib.Path,
) -> None:
    admin = Api(one_slot.url)
    agent_id = admin.agent()["id"]
    marker, go = tmp_path / "started", tmp_path / "go"
    script = WAIT_SCRIPT.format(marker=str(marker), go=str(go))
    running = _create(
        admin, config_of(entrypoint="python3 waiter.py"), files_of({"waiter.py": script})
    )
    waiter(marker.exists, 60, "the first trial to start")

    agent = admin.ok("POST", f"/api/v1/agents/{agent_id}/disable", {"drain": True})["agent"]
    assert agent["enabled"] is False and agent["draining"] is True
    assert agent["slots"]["0"]["draining"] is True
    assert agent["slots"]["0"]["container"] is not None  # still running
    queued = _create(admin, config_of(), files_of({"trial.py": trial_script}))
    waiter(lambda: admin.experiment(queued)["state"] == "STATE_QUEUED", 30, "the second one")

    go.write_text("go")
    waiter(lambda: admin.experiment(running)["state"] == "STATE_COMPLETED", 60, "the drained one")
    waiter(lambda: admin.agent()["slots"]["0"]["container"] is None, 30, "the slot to be freed")
    _stays(
        lambda: admin.experiment(queued)["state"] == "STATE_QUEUED",
        2,
        "new work started on a draining agent",
    )
    agent = admin.agent()
    assert (agent["enabled"], agent["draining"]) == (False, True)
    assert (agent["slots"]["0"]["enabled"], agent["slots"]["0"]["draining"]) == (False, True)

    admin.ok("POST", f"/api/v1/agents/{agent_id}/enable")
    assert (admin.agent()["enabled"], admin.agent()["draining"]) == (True, False)
    waiter(lambda: admin.experiment(queued)["state"] == "STATE_COMPLETED", 60, "the second one")


def test_switches_are_for_admins_and_name_what_is_unknown(one_slot: Any) -> None:
    admin = Api(one_slot.url)
    user = Api(one_slot.url, "determined")
    agent_id = user.agent()["id"]  # reading is for everybody
    assert user.ok("GET", f"/api/v1/agents/{agent_id}")["agent"]["id"] == agent_id
    assert [s["id"] for s in user.ok("GET", f"/api/v1/agents/{agent_id}/slots")["slots"]] == ["0"]
    for path in (
        f"/api/v1/agents/{agent_id}/enable",
        f"/api/v1/agents/{agent_id}/disable",
        f"/api/v1/agents/{agent_id}/slots/0/enable",
        f"/api/v1/agents/{agent_id}/slots/0/disable",
    ):
        r = user.call("POST", path, {})
        assert r.status_code == 403, (path, r.text)
    assert admin.agent()["enabled"] is True and admin.agent()["slots"]["0"]["enabled"] is True

    r = admin.call("POST", "/api/v1/agents/no-such-agent/disable", {})
    assert r.status_code == 404 and "no-such-agent" in r.text
    r = admin.call("GET", "/api/v1/agents/no-such-agent")
    assert r.status_code == 404 and "no-such-agent" in r.text
    r = admin.call("POST", f"/api/v1/agents/{agent_id}/slots/7/disable", {})
    assert r.status_code == 404 and "slot '7'" in r.text and agent_id in r.text
    r = admin.call("GET", f"/api/v1/agents/{agent_id}/slots/7")
    assert r.status_code == 404 and "slot '7'" in r.text
    r = admin.call("POST", f"/api/v1/agents/{agent_id}/disable", {"drain": "yes"})
    assert r.status_code == 400 and "drain" in r.text
    assert admin.agent()["enabled"] is True


# ---- the service on its own ----------------------------------------------------------------------


class _RefusingRM:
    """A resource manager with one pool of one free slot that cannot disable anything."""

    def describe(self) -> dict[str, Any]:
        return {"type": "stub", "slot_type": "cpu"}

    def queue_state(self) -> dict[str, Any]:
        return {"default": {"slots": [None], "slot_type": "cpu", "running": [], "queued": []}}

    def set_disabled(self, pool: str, slot_ids: Any = (), *, node: bool = False) -> None:
        raise ValueError("stub RM cannot disable agents or slots")


def test_a_switch_the_resource_manager_refuses_changes_nothing(sqlite_url: str) -> None:
    from determined.master._core._agent_states import AgentStates
    from determined.master._core._allocations import Allocations
    from determined.master._core._cluster_view import ClusterView
    from determined.master._core._transactions import Transactions
    from determined.master._wire import APIError
    from determined.master.db import AgentState, Database, SlotState, utcnow

    db = Database(sqlite_url)
    db.migrate()
    rm = _RefusingRM()
    transactions = Transactions(db)
    states = AgentStates(
        db, rm, ClusterView(db, rm, utcnow()), transactions, Allocations(transactions, rm), None
    )
    (agent,) = states.agents()
    assert agent.agent_id == "stub-default"
    for change in (
        lambda: states.set_agent("stub-default", False),
        lambda: states.set_slot("stub-default", "0", False, drain=True),
    ):
        with pytest.raises(APIError) as info:
            change()
        assert info.value.status == 400 and "cannot disable" in info.value.message
    (agent,) = states.agents()
    assert agent.enabled and agent.slots[0].enabled
    with db.read() as session:
        assert session.query(AgentState).count() == 0 and session.query(SlotState).count() == 0
    db.close()
