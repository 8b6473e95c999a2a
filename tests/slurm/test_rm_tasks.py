"""Tasks beyond trials on the Slurm resource manager: a command with a context directory runs as a
Slurm job and streams its output, and a proxied task (an HTTP server) is reached through the
master's authenticated proxy on the node Slurm placed it on."""

from __future__ import annotations

import pathlib
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from tasks.harness import http_server_source, wait_for

from determined.client import Client, read_context_dir
from determined.master._core._tasks import TaskSpec

pytestmark = pytest.mark.slow

SERVER = http_server_source("slurm")


@pytest.fixture(scope="module")
def slurm_master(slurm_cluster: Any, make_module_master: Any) -> Iterator[Any]:
    """A master whose allocations (trials and tasks) are jobs of the session's Slurm cluster."""
    shared = slurm_cluster.shared_dir / "tasks"
    master = make_module_master(
        resource_manager={
            "type": "slurm",
            "slurm_conf": str(slurm_cluster.conf),
            "job_storage_root": str(shared / "jobs"),
            "poll_interval": 0.5,
        },
        checkpoint_storage=str(shared / "checkpoints"),
    )
    yield master
    master.stop()


def test_command_with_context_runs_as_a_slurm_job(
    slurm_master: Any, slurm_cluster: Any, tmp_path: pathlib.Path
) -> None:
    admin = Client(slurm_master.session("admin"))
    context = tmp_path / "ctx"
    context.mkdir()
    (context / "note.txt").write_text("staged for the job\n")
    started = admin.commands.launch(
        {"entrypoint": "cat note.txt; echo job=$SLURM_JOB_ID", "resources": {"slots": 1}},
        read_context_dir(context),
    )
    command_id = started["command"]["id"]
    logs = "".join(e["log"] for e in admin.tasks.logs(command_id, {"follow": "true"}))
    assert "staged for the job" in logs
    job_ids = [line.split("=", 1)[1] for line in logs.splitlines() if line.startswith("job=")]
    assert job_ids and job_ids[0].isdigit(), logs  # it really ran inside a Slurm job
    command = admin.commands.get(command_id)["command"]
    assert command["exitStatus"] == "exited with code 0", logs


def test_proxied_task_on_slurm(slurm_master: Any) -> None:
    tasks = slurm_master.manager.tasks
    view = tasks.start(
        TaskSpec(kind="COMMAND", owner_id=1, argv=["python", "-c", SERVER], proxied=True, slots=1)
    )
    try:
        assert tasks.wait_ready(view.task_id, 120), tasks.get(view.task_id)
        url = f"{slurm_master.url}/proxy/{view.task_id}/x"
        assert requests.get(url).status_code == 401  # the proxy authenticates
        token = slurm_master.login("admin")
        answer = requests.get(url, headers={"Authorization": f"Bearer {token}"})
        assert (answer.status_code, answer.text) == (200, f"on slurm at /proxy/{view.task_id}/x")
    finally:
        tasks.stop(view.task_id, "test over")
    wait_for(lambda: tasks.is_done(view.task_id), "the proxied task to end", 120)
