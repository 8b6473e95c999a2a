"""Helpers of the task tests: wait for a condition or a command's state, read a task's logs."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from determined.client import Client, Session


def wait_for(predicate: Callable[[], Any], what: str, timeout: float = 60.0) -> Any:
    """Poll ``predicate`` until it is truthy (AssertionError naming ``what`` on timeout)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def command_state(api: Client, command_id: str) -> str:
    return str(api.commands.get(command_id)["command"]["state"])


def wait_command(api: Client, command_id: str, *states: str, timeout: float = 60.0) -> str:
    """Wait until the command is in one of ``states`` (default: terminated); the state."""
    wanted = states or ("STATE_TERMINATED",)
    return str(
        wait_for(
            lambda: (s := command_state(api, command_id)) in wanted and s,
            f"command {command_id} to reach {wanted}",
            timeout,
        )
    )


def log_text(session: Session, task_id: str) -> str:
    """Every log line of a task so far, joined."""
    return "".join(e.get("log") or "" for e in Client(session).tasks.logs(task_id))


def http_server_source(label: str) -> str:
    """Python source of a proxied task: an HTTP server on ``$DET_TASK_PORT`` (all interfaces, so a
    remote node's proxy reaches it) answering ``on {label} at {path}`` to every GET."""
    return (
        "import http.server, os\n"
        "class Handler(http.server.BaseHTTPRequestHandler):\n"
        "    def do_GET(self):\n"
        f"        body = f'on {label} at {{self.path}}'.encode()\n"
        "        self.send_response(200)\n"
        "        self.send_header('Content-Length', str(len(body)))\n"
        "        self.end_headers()\n"
        "        self.wfile.write(body)\n"
        "http.server.HTTPServer(('0.0.0.0', int(os.environ['DET_TASK_PORT'])), Handler)"
        ".serve_forever()\n"
    )
