"""Checkpoint garbage collection as tasks (``Checkpoint GC (Experiment N)``), against a real master
whose GC tasks run ``python -m determined.exec.gc_checkpoints`` as subprocesses: a GC run is listed
while it runs, ends TERMINATED, and what it deleted is reflected in the checkpoints' states,
resources and sizes as upstream's ``PatchCheckpoints`` records them."""

from __future__ import annotations

import pathlib
import time
from typing import Any

import pytest
from sdk.harness import TRIALS, poll, trial_config

from determined.client import Session, create_experiment, login


def _finished(session: Session, **overrides: Any) -> int:
    exp_id = create_experiment(session, trial_config(**overrides), TRIALS).id

    def done() -> bool:
        state = session.request("GET", f"/api/v1/experiments/{exp_id}")["experiment"]["state"]
        assert state not in ("STATE_ERROR", "STATE_CANCELED"), state
        return state == "STATE_COMPLETED"

    poll(done, f"experiment {exp_id}")
    return int(exp_id)


def _checkpoints(session: Session, exp_id: int) -> dict[int, dict[str, Any]]:
    rows = session.request("GET", f"/api/v1/experiments/{exp_id}/checkpoints")["checkpoints"]
    return {c["metadata"]["steps_completed"]: c for c in rows}


def _gc_tasks(master: Any, exp_id: int) -> list[Any]:
    name = f"Checkpoint GC (Experiment {exp_id})"
    return [v for v in master.manager.tasks.list("CHECKPOINT_GC") if v.description == name]


def _all_gc_done(master: Any, exp_id: int, count: int) -> list[Any]:
    """The experiment's ``count`` GC tasks once every one ended (their views)."""

    def ended() -> list[Any] | None:
        views = _gc_tasks(master, exp_id)
        return views if len(views) == count and all(v.done for v in views) else None

    return list(poll(ended, f"{count} GC task(s) of experiment {exp_id} ending"))


def _watch_listing(session: Session, name: str, timeout: float = 60.0) -> bool:
    """Upstream's ``wait_for_gc_to_finish``: True once ``name`` was listed by ``GET /tasks`` and
    then no longer is; False when it was never seen before ``timeout``."""
    seen = False
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        names = [t["name"] for t in session.request("GET", "/tasks").values()]
        if name in names:
            seen = True
        elif seen:
            return True
        time.sleep(0.01)
    return False


def _storage_dir(master: Any, exp_id: int, uuid: str) -> pathlib.Path:
    from determined.master.db import Experiment

    with master.db.read() as db_session:
        storage = dict(db_session.get(Experiment, exp_id).config["checkpoint_storage"])
    return pathlib.Path(storage["host_path"], storage.get("storage_path") or "", uuid)


def test_policy_gc_of_a_finished_experiment_is_a_task(sqlite_master: Any) -> None:
    s = login(sqlite_master.url, "admin", "")
    exp_id = _finished(s, checkpoint_storage={"save_trial_latest": 1, "save_trial_best": 0})
    (view,) = _all_gc_done(sqlite_master, exp_id, 1)
    assert view.exit_code == 0, view.exit_status
    task = s.request("GET", f"/api/v1/tasks/{view.task_id}")["task"]
    assert task["taskType"] == "TASK_TYPE_CHECKPOINT_GC"
    assert task["endTime"] >= task["startTime"]
    ckpts = _checkpoints(s, exp_id)
    states = {step: c["state"] for step, c in ckpts.items()}
    assert states == {1: "STATE_DELETED", 2: "STATE_DELETED", 3: "STATE_COMPLETED"}
    for step in (1, 2):
        assert not _storage_dir(sqlite_master, exp_id, ckpts[step]["uuid"]).exists()
    assert _storage_dir(sqlite_master, exp_id, ckpts[3]["uuid"]).is_dir()
    # not in anyone's list of commands, and no part of the owner's task quota
    assert s.request("GET", "/api/v1/commands")["commands"] == []


def test_delete_is_listed_while_it_runs_then_ends(sqlite_master: Any) -> None:
    s = login(sqlite_master.url, "admin", "")
    exp_id = _finished(s)
    ckpts = _checkpoints(s, exp_id)
    doomed = [ckpts[1]["uuid"], ckpts[2]["uuid"]]
    s.request("DELETE", "/api/v1/checkpoints", body={"checkpointUuids": doomed})
    # marked at once, as upstream; the files go with the task
    assert {_checkpoints(s, exp_id)[k]["state"] for k in (1, 2)} == {"STATE_DELETED"}
    assert _watch_listing(s, f"Checkpoint GC (Experiment {exp_id})")
    (view,) = _all_gc_done(sqlite_master, exp_id, 1)
    assert view.state == "TERMINATED" and view.exit_code == 0, view.exit_status
    for uuid in doomed:
        assert not _storage_dir(sqlite_master, exp_id, uuid).exists()
    listed = s.request("GET", "/api/v1/tasks")["allocationIdToSummary"]
    assert view.allocation_id not in listed


def test_partial_delete_records_what_remains(sqlite_master: Any) -> None:
    s = login(sqlite_master.url, "admin", "")
    exp_id = _finished(s)
    ckpts = _checkpoints(s, exp_id)
    uuid = ckpts[3]["uuid"]
    before = ckpts[3]["resources"]
    assert {"weights.bin", "state.json"} <= set(before)
    total = int(s.request("GET", f"/api/v1/experiments/{exp_id}")["experiment"]["checkpointSize"])

    def remove(globs: list[str], runs: int) -> dict[str, Any]:
        body = {"checkpointUuids": [uuid], "checkpointGlobs": globs}
        s.request("POST", "/api/v1/checkpoints/rm", body=body)
        (*_, last) = _all_gc_done(sqlite_master, exp_id, runs)
        assert last.exit_code == 0, last.exit_status
        return dict(s.request("GET", f"/api/v1/checkpoints/{uuid}")["checkpoint"])

    # no globs and nothing changed: a refresh, still COMPLETED
    after = remove([], 1)
    assert after["state"] == "STATE_COMPLETED" and after["resources"] == before
    # a matching glob: PARTIALLY_DELETED, the rest listed, the size shrinks
    after = remove(["*.bin"], 2)
    assert after["state"] == "STATE_PARTIALLY_DELETED"
    assert set(after["resources"]) == set(before) - {"weights.bin"}
    size = int(s.request("GET", f"/api/v1/experiments/{exp_id}")["experiment"]["checkpointSize"])
    assert size == total - int(before["weights.bin"])
    # everything: DELETED, the last file list kept, the size no longer counted
    kept = after["resources"]
    after = remove(["**/*"], 3)
    assert after["state"] == "STATE_DELETED" and after["resources"] == kept
    size = int(s.request("GET", f"/api/v1/experiments/{exp_id}")["experiment"]["checkpointSize"])
    assert size == total - sum(int(v) for v in before.values())
    assert not _storage_dir(sqlite_master, exp_id, uuid).exists()


def test_bad_globs_are_refused(sqlite_master: Any) -> None:
    from determined.client import APIError

    s = login(sqlite_master.url, "admin", "")
    exp_id = _finished(s)
    uuid = _checkpoints(s, exp_id)[1]["uuid"]
    for globs in ([3], "x"):
        body = {"checkpointUuids": [uuid], "checkpointGlobs": globs}
        with pytest.raises(APIError, match="checkpointGlobs") as err:
            s.request("POST", "/api/v1/checkpoints/rm", body=body)
        assert err.value.status == 400
    assert _gc_tasks(sqlite_master, exp_id) == []
