"""Tasks beyond trials on the Ray resource manager: a command with a context directory runs on a
Ray node and streams its output; a proxied task is reached through the master's proxy at the
address of the node Ray placed it on."""

from __future__ import annotations

import pathlib
import time
from collections.abc import Callable
from typing import Any

import requests

from determined.client import Client, read_context_dir
from determined.master._core._tasks import TaskSpec

SERVER = r"""
import http.server, os
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = f"on ray at {self.path}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
http.server.HTTPServer(("0.0.0.0", int(os.environ["DET_TASK_PORT"])), Handler).serve_forever()
"""


def _wait(predicate: Callable[[], Any], what: str, timeout: float = 120.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)
    return value


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
    _wait(lambda: tasks.is_done(view.task_id), "the proxied task to end")
