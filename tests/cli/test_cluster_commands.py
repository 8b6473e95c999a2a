"""``det version``, ``det job list|update``, ``det agent|slot list``, ``det resources``, ``det master
config`` and ``det master cluster-message`` against a real master (one slot, so a second job
queues) with Core API trials."""

from __future__ import annotations

import csv
import datetime
import io
import json
import pathlib
from collections.abc import Callable
from typing import Any

import pytest
import yaml
from cli.harness import Det, created_id, wait_for, wait_state

import determined
from determined.client import Session


@pytest.fixture(scope="module")
def det_master(make_module_master: Any) -> Any:
    """This module's master: one slot, so one running trial holds the machine."""
    return make_module_master(slots=1)


def _create(det: Det, config: pathlib.Path, context: pathlib.Path) -> int:
    return created_id(det.ok("e", "create", str(config), str(context)))


def _rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def test_version_shows_client_and_master(det: Det) -> None:
    info = yaml.safe_load(det.ok("version"))
    master = yaml.safe_load(det.ok("master", "info"))
    assert info["client"]["version"]
    assert info["master"]["version"] == master["version"] == determined.__version__
    assert info["master"]["cluster_id"] == master["clusterId"]
    assert info["master_address"] == det.url
    # an unreachable master: still the client's version, and a hint on stderr
    code, out, err = det.run("-m", "127.0.0.1:9", "version")
    assert code == 0
    shown = yaml.safe_load(out)
    assert shown["master"]["version"] == "" and shown["client"]["version"]
    assert "Master not found at http://127.0.0.1:9" in err


def test_job_list_slot_list_and_resources(
    det: Det, api: Session, write_config: Callable[..., pathlib.Path], context_dir: pathlib.Path
) -> None:
    forever = {"forever": True}
    holder = _create(det, write_config(hyperparameters=forever), context_dir)
    wait_for(lambda: "STATE_SCHEDULED" in det.ok("job", "list"), "the first job to be scheduled")
    low = _create(
        det, write_config(hyperparameters=forever, resources={"priority": 50}), context_dir
    )
    high = _create(
        det, write_config(hyperparameters=forever, resources={"priority": 10}), context_dir
    )
    try:
        jobs = wait_for(
            lambda: len(j := json.loads(det.ok("job", "ls", "--json"))["jobs"]) == 3 and j,
            "three jobs in the queue",
        )
        assert [j["entityId"] for j in jobs] == [str(holder), str(high), str(low)]
        assert [j["summary"] for j in jobs] == [
            {"state": "STATE_SCHEDULED", "jobsAhead": 0},
            {"state": "STATE_QUEUED", "jobsAhead": 1},
            {"state": "STATE_QUEUED", "jobsAhead": 2},
        ]
        assert [(j["allocatedSlots"], j["requestedSlots"]) for j in jobs] == [
            (1, 1),
            (0, 1),
            (0, 1),
        ]
        assert [j["priority"] for j in jobs] == [42, 10, 50]
        assert {j["username"] for j in jobs} == {"determined"}
        assert all(j["type"] == "TYPE_EXPERIMENT" and j["jobId"] for j in jobs)

        table = det.ok("j").splitlines()  # `det job` alone lists
        assert table[0].split("|")[0].strip() == "#"
        assert [c.strip() for c in table[0].split("|")][1:] == [
            "ID",
            "Type",
            "Job Name",
            "Priority",
            "Submitted",
            "Slots (acquired/needed)",
            "State",
            "User",
        ]
        assert f"cli-test ({holder})" in table[2] and "1/1" in table[2]
        assert f"cli-test ({high})" in table[3] and "STATE_QUEUED" in table[3]
        rows = _rows(det.ok("job", "list", "--csv", "--reverse"))
        assert [r["Job Name"] for r in rows] == [f"cli-test ({i})" for i in (low, high, holder)]
        assert yaml.safe_load(det.ok("job", "list", "--yaml"))["jobs"][0]["entityId"] == str(holder)
        assert len(json.loads(det.ok("job", "list", "--json", "--limit", "1"))["jobs"]) == 3
        one_page = det.ok("job", "list", "--json", "--limit", "1", "--pages", "1")
        assert len(json.loads(one_page)["jobs"]) == 1

        # det job update: the low-priority job moves ahead; update-batch moves the other back
        low_job = jobs[2]["jobId"]
        det.ok("job", "update", low_job, "-p", "5")
        queue = json.loads(det.ok("job", "list", "--json"))["jobs"]
        assert [j["entityId"] for j in queue] == [str(holder), str(low), str(high)]
        assert queue[1]["priority"] == 5
        assert yaml.safe_load(det.ok("e", "config", str(low)))["resources"]["priority"] == 5
        det.ok("job", "update-batch", f"{jobs[1]['jobId']}.priority=1", f"{low_job}.weight=2")
        queue = json.loads(det.ok("job", "list", "--json"))["jobs"]
        assert [j["entityId"] for j in queue] == [str(holder), str(high), str(low)]
        assert queue[2]["weight"] == 2.0
        for argv, text in (
            (["update-batch", f"{low_job}.priority"], "invalid format"),
            (["update-batch", f"{low_job}.color=red"], "Invalid operation color"),
            (["update", low_job, "-p", "100"], "between 1 and 99"),
            (["update", "no-such-job", "-p", "3"], "not found"),
        ):
            code, _, err = det.run("job", *argv)
            assert code == 1 and text in err, err

        slots = json.loads(det.ok("slot", "list", "--json"))
        assert len(slots) == 1
        holder_trial = api.request("GET", f"/api/v1/experiments/{holder}/trials")["trials"][0]
        name = f"Trial {holder_trial['id']} (Experiment {holder})"
        assert {s["task_name"] for s in slots} == {name}
        assert len({s["allocation_id"] for s in slots}) == 1
        assert {s["type"] for s in slots} <= {"cpu", "cuda"}
        assert [s["slot_id"] for s in slots] == ["0"]
        slot_table = det.ok("s").splitlines()
        assert "Task Name" in slot_table[0] and len(slot_table) == 2 + 1
        agents = json.loads(det.ok("agent", "list", "--json"))
        assert len(agents) == 1
        assert agents[0]["num_slots"] == 1 and agents[0]["num_containers"] == 1
        assert agents[0]["resource_pools"] == "default"
    finally:
        for exp_id in (holder, low, high):
            det.ok("e", "kill", str(exp_id))
    for exp_id in (holder, low, high):
        wait_state(api, exp_id)
    wait_for(lambda: json.loads(det.ok("job", "ls", "--json"))["jobs"] == [], "an empty queue")
    slots = _rows(det.ok("slot", "list", "--csv"))
    assert {(s["Allocation ID"], s["Task Name"]) for s in slots} == {("FREE", "FREE")}

    # det resources: the killed trials' allocations, by allocation, raw and per day; cluster usage
    # needs VIEW_CLUSTER_USAGE (RBAC): an admin's
    span = ("2000-01-01T00:00:00Z", "2100-01-01T00:00:00Z")
    code, _, err = det.run("resources", "raw", *span)
    assert code == 1 and "PERMISSION_TYPE_VIEW_CLUSTER_USAGE" in err, err
    admin = ("-u", "admin")
    allocations = _rows(det.ok(*admin, "resources", "allocations", *span))
    mine = [r for r in allocations if r["experiment_id"] == str(holder)]
    assert len(mine) == 1
    assert mine[0]["slots"] == "1" and mine[0]["username"] == "determined"
    assert mine[0]["resource_pool"] == "default" and float(mine[0]["slot_hours"]) > 0
    assert mine[0]["start_time"] and mine[0]["end_time"]
    raw = _rows(det.ok(*admin, "res", "raw", *span))
    assert [r["kind"] for r in raw if r["experiment_id"] == str(holder)] == ["experiment"]
    entries = json.loads(det.ok(*admin, "resources", "raw", *span, "--json"))["resourceEntries"]
    assert any(e["experimentId"] == holder and e["slots"] == 1 for e in entries)
    today = datetime.datetime.now(datetime.timezone.utc).date()
    first, last = str(today - datetime.timedelta(days=1)), str(today)
    daily = _rows(det.ok(*admin, "resources", "aggregated", first, last))
    totals = {r["date"]: float(r["seconds"]) for r in daily if r["aggregation_type"] == "total"}
    assert set(totals) == {first, last} and totals[last] > 0
    users = [r for r in daily if r["aggregation_type"] == "username" and r["date"] == last]
    assert [r["aggregation_key"] for r in users] == ["determined"]
    monthly = json.loads(
        det.ok(
            *admin,
            "res",
            "agg",
            today.strftime("%Y-%m"),
            today.strftime("%Y-%m"),
            "--monthly",
            "--json",
        )
    )["resourceEntries"]
    assert [e["periodStart"] for e in monthly] == [today.strftime("%Y-%m")]
    assert monthly[0]["seconds"] >= totals[last] - 1e-6  # sums of floats in another order
    code, _, err = det.run(*admin, "resources", "aggregated", last, first)
    assert code == 1 and "start date cannot be after end date" in err


def test_master_config_is_for_admins(det: Det) -> None:
    code, out, err = det.run("-u", "determined", "master", "config")
    assert code == 1 and out == "" and "forbidden" in err
    config = yaml.safe_load(det.ok("-u", "admin", "master", "config"))
    assert config["checkpoint_storage"]["type"] == "shared_fs"
    assert json.loads(det.ok("-u", "admin", "master", "config", "--json")) == config
    assert json.loads(det.ok("-u", "admin", "master", "config", "show", "--json")) == config
    assert config["log"] == {"level": "info", "color": False}

    # det master config set: the log level and colour until the master restarts
    code, out, err = det.run("-u", "admin", "master", "config", "set", "--log.level", "DEBUG")
    assert code == 0 and out == "Successfully made changes to the master config.\n"
    assert "ephemeral" in err
    try:
        det.ok("-u", "admin", "master", "config", "set", "--log.color", "on")
        shown = json.loads(det.ok("-u", "admin", "master", "config", "--json"))["log"]
        assert shown == {"level": "debug", "color": True}
    finally:
        det.ok(
            "-u", "admin", "master", "config", "set", "--log.level", "INFO", "--log.color", "off"
        )
    assert yaml.safe_load(det.ok("-u", "admin", "master", "config"))["log"]["level"] == "info"
    code, _, err = det.run("-u", "determined", "master", "config", "set", "--log.level", "DEBUG")
    assert code == 1 and "forbidden" in err
    code, _, err = det.run("-u", "admin", "master", "config", "set")
    assert code == 1 and "--log.level and --log.color" in err


def test_cluster_message_set_get_clear(det: Det) -> None:
    assert yaml.safe_load(det.ok("-u", "admin", "master", "cluster-message", "get")) == {}
    det.ok("-u", "admin", "master", "cluster-message", "set", "-m", "upgrade at 5pm", "-d", "2h")
    shown = json.loads(det.ok("-u", "admin", "master", "cluster-message", "get", "--json"))
    message = shown["clusterMessage"]
    assert message["message"] == "upgrade at 5pm"
    start = datetime.datetime.fromisoformat(message["startTime"].replace("Z", "+00:00"))
    end = datetime.datetime.fromisoformat(message["endTime"].replace("Z", "+00:00"))
    assert end - start == datetime.timedelta(hours=2)
    # every user sees the active message with the master's description
    info = json.loads(det.ok("master", "info", "--json"))
    assert info["clusterMessage"]["message"] == "upgrade at 5pm"

    # only admins manage it
    code, _, err = det.run("-u", "determined", "master", "cluster-message", "set", "-m", "mine")
    assert code == 1 and "forbidden" in err
    code, _, err = det.run("-u", "determined", "master", "cluster-message", "get")
    assert code == 1 and "forbidden" in err

    # a new message replaces the old one; days and weeks are durations too
    det.ok("-u", "admin", "master", "cluster-message", "set", "-m", "second", "-d", "1w2d")
    second = json.loads(det.ok("-u", "admin", "master", "cluster-message", "get", "--json"))
    second_end = second["clusterMessage"]["endTime"]
    second_start = second["clusterMessage"]["startTime"]
    gap = datetime.datetime.fromisoformat(
        second_end.replace("Z", "+00:00")
    ) - datetime.datetime.fromisoformat(second_start.replace("Z", "+00:00"))
    assert gap == datetime.timedelta(days=9)

    # a message that starts later: admins see it, users not yet
    later = (datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=1)).strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )
    det.ok("-u", "admin", "master", "cluster-message", "set", "-m", "tomorrow", "-s", later)
    assert "tomorrow" in det.ok("-u", "admin", "master", "cluster-message", "get")
    assert "clusterMessage" not in json.loads(det.ok("master", "info", "--json"))

    det.ok("-u", "admin", "master", "cluster-message", "clear")
    assert yaml.safe_load(det.ok("-u", "admin", "master", "cluster-message", "get")) == {}
    assert "clusterMessage" not in json.loads(det.ok("master", "info", "--json"))

    # refusals, each one line
    for argv, text in (
        (["-m", "x", "-d", "soon"], "duration"),
        (["-m", "x", "-e", "2001-01-01T00:00:00Z"], "end time must be after"),
        (["-m", "x", "-s", "yesterday"], "RFC-3339"),
        (["-m", "x" * 251, "-d", "1h"], "at most 250 characters"),
        ([], "Provide a message"),
    ):
        code, _, err = det.run("-u", "admin", "master", "cluster-message", "set", *argv)
        assert code == 1 and text in err, err
    code, _, err = det.run("-u", "admin", "master", "cluster-message", "set", "-e", "a", "-d", "1h")
    assert code == 2  # argparse: --end and --duration exclude each other


def test_cluster_answers_carry_upstream_required_fields(
    det: Det, api: Session, write_config: Callable[..., pathlib.Path], context_dir: pathlib.Path
) -> None:
    """Upstream's own client parses these answers with required fields (its ``bindings``)."""
    pool = api.request("GET", "/api/v1/resource-pools")["resourcePools"][0]
    assert set(pool) >= {
        "agentDockerImage",
        "auxContainerCapacity",
        "clusterName",
        "defaultAuxPool",
        "defaultComputePool",
        "details",
        "maxAgents",
        "name",
        "numAgents",
        "preemptible",
        "resourceManagerMetadata",
        "schedulerFittingPolicy",
        "schedulerType",
        "slotType",
        "slotsAvailable",
        "slotsUsed",
        "startupScript",
        "type",
    }
    exp_id = _create(det, write_config(hyperparameters={"forever": True}), context_dir)
    try:
        (wrapped,) = wait_for(
            lambda: api.request("GET", "/api/v1/job-queues-v2")["jobs"], "a job in the queue"
        )
        assert set(wrapped["full"]) >= {
            "allocatedSlots",
            "entityId",
            "isPreemptible",
            "jobId",
            "name",
            "requestedSlots",
            "resourcePool",
            "submissionTime",
            "type",
            "username",
            "workspaceId",
        }
        assert set(wrapped["full"]["summary"]) == {"jobsAhead", "state"}
        (v1_job,) = api.request("GET", "/api/v1/job-queues")["jobs"]
        assert v1_job == wrapped["full"]
        wait_for(
            lambda: api.request("GET", "/api/v1/tasks")["allocationIdToSummary"], "a running task"
        )
        (agent,) = api.request("GET", "/api/v1/agents")["agents"]
        (slot,) = agent["slots"].values()
        assert set(slot["container"]) >= {"id", "state"}
        assert set(slot["device"]) == {"brand", "id", "type", "uuid"}
        summary = api.request("GET", "/api/v1/tasks")["allocationIdToSummary"]
        assert [r["containerId"] for s in summary.values() for r in s["resources"]] == [
            slot["container"]["id"]
        ]
    finally:
        det.ok("e", "kill", str(exp_id))
        wait_state(api, exp_id)
