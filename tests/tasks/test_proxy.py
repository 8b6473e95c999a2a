"""The authenticated reverse proxy ``/proxy/{task_id}/`` to real task processes: HTTP (methods,
query, bodies, large streamed answers, cookies), WebSocket, 401/403/503/404, and the idle timeout
that only proxied traffic defers."""

from __future__ import annotations

import time
from typing import Any

import pytest
import requests
from tasks.harness import log_text, wait_for

from determined.master._core._tasks import TaskSpec

HTTP_SERVER = r"""
import http.server, os, time
class Handler(http.server.BaseHTTPRequestHandler):
    def _answer(self, body, status=200):
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Set-Cookie", "task_cookie=1; Path=/")
        self.end_headers()
        self.wfile.write(body)
    def do_GET(self):
        if self.path.endswith("/big"):
            return self._answer(b"x" * (3 * 1024 * 1024))
        if "/stream?" in self.path:
            marker = self.path.split("marker=", 1)[1]
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"first\n")
            self.wfile.flush()
            while not os.path.exists(marker):
                time.sleep(0.05)
            self.wfile.write(b"second\n")
            self.close_connection = True
            return
        cookie = self.headers.get("Cookie") or ""
        auth = self.headers.get("Authorization") or ""
        self._answer(f"GET {self.path} cookie=[{cookie}] auth=[{auth}]".encode())
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._answer(b"POST " + self.path.encode() + b" " + body, status=201)
    def log_message(self, *args):
        pass
print("serving on", os.environ["DET_TASK_PORT"], "under", os.environ["DET_TASK_BASE_PATH"])
http.server.ThreadingHTTPServer(("127.0.0.1", int(os.environ["DET_TASK_PORT"])), Handler).serve_forever()
"""

WS_SERVER = r"""
import os
from websockets.sync.server import serve
def echo(ws):
    for message in ws:
        ws.send("echo:" + message if isinstance(message, str) else message)
with serve(echo, "127.0.0.1", int(os.environ["DET_TASK_PORT"])) as server:
    server.serve_forever()
"""


def start(master: Any, script: str, owner: str = "admin", **spec: Any) -> str:
    """Start a proxied task running ``script`` as ``owner``; its id once it is ready."""
    from determined.master.db import User

    with master.db.read() as session:
        from sqlalchemy import select

        owner_id = session.scalar(select(User.id).where(User.username == owner))
    tasks = master.manager.tasks
    view = tasks.start(
        TaskSpec(
            kind="COMMAND", owner_id=owner_id, argv=["python", "-c", script], proxied=True, **spec
        )
    )
    assert tasks.wait_ready(view.task_id, 60), tasks.get(view.task_id)
    return view.task_id


@pytest.fixture(scope="module")
def http_task(module_master: Any) -> str:
    task_id = start(module_master, HTTP_SERVER)
    yield task_id
    module_master.manager.tasks.stop(task_id, "test over")


def test_http_forwarding_with_bearer_and_cookie(module_master: Any, http_task: str) -> None:
    token = module_master.login("admin")
    base = f"{module_master.url}/proxy/{http_task}/"
    answer = requests.get(base + "a/b?x=1&y=2", headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 200
    assert answer.text == f"GET /proxy/{http_task}/a/b?x=1&y=2 cookie=[] auth=[]"
    assert answer.cookies.get("task_cookie") == "1"
    # the web UI's cookie works too, and only the master's own cookie is withheld from the task
    cookies = {"auth": token, "_xsrf": "abc"}
    answer = requests.get(base + "c", cookies=cookies)
    assert answer.status_code == 200 and "cookie=[_xsrf=abc]" in answer.text
    posted = requests.post(base + "form", data=b"payload", cookies={"auth": token})
    assert (posted.status_code, posted.text) == (201, f"POST /proxy/{http_task}/form payload")
    big = requests.get(base + "big", cookies={"auth": token}, stream=True)
    assert big.status_code == 200
    assert sum(len(c) for c in big.iter_content(65536)) == 3 * 1024 * 1024
    root = requests.get(f"{module_master.url}/proxy/{http_task}?q=1", cookies={"auth": token})
    assert root.status_code == 200 and f"GET /proxy/{http_task}/?q=1" in root.text


def test_answers_stream_through(module_master: Any, http_task: str, tmp_path: Any) -> None:
    """The first chunk reaches the caller while the task still holds back the rest."""
    marker = tmp_path / "go"
    token = module_master.login("admin")
    url = f"{module_master.url}/proxy/{http_task}/stream?marker={marker}"
    with requests.get(url, cookies={"auth": token}, stream=True, timeout=60) as answer:
        lines = answer.iter_lines()
        assert next(lines) == b"first"
        marker.write_text("go")
        assert next(lines) == b"second"


def test_proxy_refuses_without_auth_and_other_users(module_master: Any, http_task: str) -> None:
    url = f"{module_master.url}/proxy/{http_task}/"
    assert requests.get(url).status_code == 401
    assert requests.get(url, headers={"Authorization": "Bearer nope"}).status_code == 401
    other = module_master.login("determined")
    refused = requests.get(url, headers={"Authorization": f"Bearer {other}"})
    assert refused.status_code == 403 and "owner" in refused.text
    missing = requests.get(
        f"{module_master.url}/proxy/00000000-0000-4000-8000-000000000000/",
        headers={"Authorization": f"Bearer {other}"},
    )
    assert missing.status_code == 404


def test_websocket_relay(module_master: Any) -> None:
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    task_id = start(module_master, WS_SERVER)
    token = module_master.login("admin")
    url = module_master.url.replace("http://", "ws://") + f"/proxy/{task_id}/api/kernels/1"
    try:
        with connect(url, additional_headers={"Authorization": f"Bearer {token}"}) as ws:
            ws.send("hi")
            assert ws.recv(timeout=30) == "echo:hi"
            ws.send(b"\x00\x01")
            assert ws.recv(timeout=30) == b"\x00\x01"
        with pytest.raises(InvalidStatus), connect(url):
            pass
    finally:
        module_master.manager.tasks.stop(task_id, "test over")


def test_not_ready_is_503_and_ended_is_404(module_master: Any) -> None:
    from determined.master.db import User

    tasks = module_master.manager.tasks
    with module_master.db.read() as session:
        admin_id = session.query(User).filter(User.username == "admin").one().id
    view = tasks.start(
        TaskSpec(kind="NOTEBOOK", owner_id=admin_id, argv=["sleep", "120"], proxied=True)
    )
    token = module_master.login("admin")
    url = f"{module_master.url}/proxy/{view.task_id}/"
    headers = {"Authorization": f"Bearer {token}"}
    wait_for(lambda: tasks.get(view.task_id).state == "RUNNING", "the task to run")
    waiting = requests.get(url, headers=headers)
    assert waiting.status_code == 503 and "not ready yet" in waiting.text
    tasks.stop(view.task_id, "test over")
    wait_for(lambda: tasks.is_done(view.task_id), "the task to end")
    ended = requests.get(url, headers=headers)
    assert ended.status_code == 404 and "has ended" in ended.text


def test_idle_timeout_counts_only_proxied_traffic(module_master: Any) -> None:
    tasks = module_master.manager.tasks
    # Logged in first: the idle clock runs from the moment the task is up, and a login (a password
    # hash) on a loaded machine took longer than the timeout, so the task died before any traffic.
    token = module_master.login("admin")
    task_id = start(module_master, HTTP_SERVER, idle_timeout=1.5)
    url = f"{module_master.url}/proxy/{task_id}/ping"
    deadline = time.monotonic() + 3.0
    while time.monotonic() < deadline:  # traffic keeps it alive past its timeout
        assert requests.get(url, cookies={"auth": token}).status_code == 200
        time.sleep(0.2)
    assert not tasks.is_done(task_id)
    wait_for(lambda: tasks.is_done(task_id), "the idle task to be killed", timeout=30)
    view = tasks.get(task_id)
    assert view.exit_status == "killed after idle timeout of 1.5s"
    logs = log_text(module_master.session("admin"), task_id)
    assert "killed after idle timeout" in logs
