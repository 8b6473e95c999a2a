"""Tasks beyond trials on the Ray resource manager: a command with a context directory runs on a
Ray node and streams its output; a proxied task is reached through the master's proxy at the
address of the node Ray placed it on."""

from __future__ import annotations

import pathlib
from collections.abc import Callable
from typing import Any

import requests
from tasks.harness import http_server_source, wait_for

from determined.client import Client, read_context_dir
from determined.master._core._tasks import TaskSpec

SERVER = http_server_source("ray")


def test_command_and_proxied_task_on_ray(
    ray_master: Callable[..., Any], tmp_path: pathlib.Path
) -> None:
    master = ray_master()
    admin = Client(master.session("admin"))
    context = tmp_path / "ctx"
    context.mkdir()
    (context / "note.txt").write_text("shipped to the node\n")
    started = admin.commands.launch(
        {"entrypoint": "cat note.txt; echo slots=$DET_SLOT_IDS", "resources": {"slots": 1}},
        read_context_dir(context),
    )
    command_id = started["command"]["id"]
    logs = "".join(e["log"] for e in admin.tasks.logs(command_id, {"follow": "true"}))
    assert "shipped to the node" in logs
    command = admin.commands.get(command_id)["command"]
    assert command["exitStatus"] == "exited with code 0", logs

    tasks = master.manager.tasks
    view = tasks.start(
        TaskSpec(kind="COMMAND", owner_id=1, argv=["python", "-c", SERVER], proxied=True, slots=1)
    )
    try:
        assert tasks.wait_ready(view.task_id, 120), tasks.get(view.task_id)
        token = master.login("admin")
        answer = requests.get(
            f"{master.url}/proxy/{view.task_id}/x", headers={"Authorization": f"Bearer {token}"}
        )
        assert (answer.status_code, answer.text) == (200, f"on ray at /proxy/{view.task_id}/x")
    finally:
        tasks.stop(view.task_id, "test over")
    wait_for(lambda: tasks.is_done(view.task_id), "the proxied task to end", 120)
