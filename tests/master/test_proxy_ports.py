"""Experiment proxy ports (``environment.proxy_ports``) through a real det-master: a real trial
serves HTTP and a TCP echo on its ports; ``/proxy/<task id>:<port>/`` reaches the HTTP one, a
WebSocket on the TCP one carries the stream (upstream's ``determined.cli.tunnel`` protocol), only
logged-in callers get through unless the port is ``unauthenticated``, and the services end with
the trial. det's own client side too: ``python -m determined.cli.tunnel`` and ``det e create -f
-p``."""

from __future__ import annotations

import os
import pathlib
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests
import yaml
from e2e.harness import TERMINAL
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

SERVERS = r"""
import http.server, os, socket, sys, threading

HTTP, TCP, OPEN = (int(p) for p in sys.argv[1:4])

class Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        auth = self.headers.get("Authorization") or ""
        body = f"Hello {self.path} auth=[{auth}]".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass

def echo(conn):
    with conn:
        while data := conn.recv(4096):
            conn.sendall(data)

def tcp():
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", TCP))
    s.listen()
    while True:
        conn, _ = s.accept()
        threading.Thread(target=echo, args=(conn,), daemon=True).start()

servers = [http.server.ThreadingHTTPServer(("127.0.0.1", p), Hello) for p in (HTTP, OPEN)]
for server in servers:
    threading.Thread(target=server.serve_forever, daemon=True).start()
threading.Thread(target=tcp, daemon=True).start()
print("Servers started", flush=True)
threading.Event().wait()
"""


def _free_ports(n: int) -> list[int]:
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def _config(http_port: int, tcp_port: int, open_port: int) -> dict[str, Any]:
    return {
        "name": "proxy-ports",
        "entrypoint": f"python3 servers.py {http_port} {tcp_port} {open_port}",
        "searcher": {"name": "single", "metric": "x", "max_length": 1},
        "resources": {"slots_per_trial": 0},
        "max_restarts": 0,
        "environment": {
            "proxy_ports": [
                {"proxy_port": http_port},
                {"proxy_port": tcp_port, "proxy_tcp": True},
                {"proxy_port": open_port, "unauthenticated": True},
            ]
        },
    }


def _serving(master: Any, context: pathlib.Path) -> dict[str, Any]:
    """Start an experiment whose trial serves an HTTP port, a TCP port and an unauthenticated
    HTTP port (free ports of this machine); its facts once the servers run."""
    http_port, tcp_port, open_port = _free_ports(3)
    (context / "servers.py").write_text(SERVERS)
    api = master.api()
    exp_id = api.create_experiment(_config(http_port, tcp_port, open_port), context)
    trial = api.wait_for(
        lambda: next(
            (t for t in api.trials(exp_id) if "Servers started" in "".join(api.logs(t["id"]))),
            None,
        ),
        120,
        "the trial's servers",
    )
    token = master.login("determined")
    return {
        "api": api,
        "exp_id": exp_id,
        "trial": trial,
        "task": trial["taskId"],
        "http": http_port,
        "tcp": tcp_port,
        "open": open_port,
        "headers": {"Authorization": f"Bearer {token}"},
        "url": master.url,
    }


def _kill(serving: dict[str, Any]) -> None:
    api = serving["api"]
    if api.experiment(serving["exp_id"])["state"] not in TERMINAL:
        api.post(f"/api/v1/experiments/{serving['exp_id']}/kill")


@pytest.fixture(scope="module")
def serving(module_master: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """A running trial with an HTTP port, a TCP port and an unauthenticated HTTP port."""
    facts = _serving(module_master, tmp_path_factory.mktemp("ports"))
    yield facts
    _kill(facts)


def _echo_through(
    port: int, message: bytes, proc: subprocess.Popen[str], timeout: float = 60
) -> None:
    """Poll until ``localhost:port`` (a tunnel's listener) echoes ``message``."""
    deadline = time.monotonic() + timeout
    while True:
        assert proc.poll() is None, f"the tunnel exited: {proc.communicate()}"
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
                conn.sendall(message)
                received = b""
                while len(received) < len(message):
                    chunk = conn.recv(4096)
                    if not chunk:
                        break
                    received += chunk
            assert received == message, received
            return
        except ConnectionRefusedError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def _cli_env(url: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"DET_MASTER": url, "DET_USER": "determined", "DET_PASS": ""})
    env.pop("DET_USER_TOKEN", None)
    return env


def test_http_port_is_reached_through_the_master(serving: dict) -> None:
    url = f"{serving['url']}/proxy/{serving['task']}:{serving['http']}/a/b?x=1"
    answer = requests.get(url, headers=serving["headers"], timeout=30)
    assert answer.status_code == 200, answer.text
    # the full path reaches the trial; the master's credentials do not
    assert answer.text == f"Hello /proxy/{serving['task']}:{serving['http']}/a/b?x=1 auth=[]"


def test_tcp_port_round_trip_over_a_websocket(serving: dict) -> None:
    ws_url = serving["url"].replace("http://", "ws://")
    url = f"{ws_url}/proxy/{serving['task']}:{serving['tcp']}/"
    with connect(url, additional_headers=serving["headers"], open_timeout=30) as ws:
        ws.send(b"Hello, Server")
        assert ws.recv(timeout=30) == b"Hello, Server"
        payload = bytes(range(256)) * 1024
        ws.send(payload)
        echoed = b""
        while len(echoed) < len(payload):
            echoed += ws.recv(timeout=30)
        assert echoed == payload
    # a TCP port speaks no HTTP
    answer = requests.get(
        f"{serving['url']}/proxy/{serving['task']}:{serving['tcp']}/",
        headers=serving["headers"],
        timeout=30,
    )
    assert answer.status_code == 400 and "proxy_tcp" in answer.text


def test_unauthenticated_callers_are_refused_unless_the_port_allows_them(serving: dict) -> None:
    base = f"{serving['url']}/proxy/{serving['task']}"
    assert requests.get(f"{base}:{serving['http']}/", timeout=30).status_code == 401
    with pytest.raises(InvalidStatus):
        connect(base.replace("http://", "ws://") + f":{serving['tcp']}/", open_timeout=30)
    # an unauthenticated port lets anyone in, and the app sees the caller's own credentials
    answer = requests.get(
        f"{base}:{serving['open']}/", headers={"Authorization": "Basic dTpw"}, timeout=30
    )
    assert answer.status_code == 200, answer.text
    assert answer.text.endswith("auth=[Basic dTpw]")
    # a port the experiment does not list is no service
    answer = requests.get(f"{base}:1/", headers=serving["headers"], timeout=30)
    assert answer.status_code == 404 and "proxy port 1" in answer.text


def test_dets_tunnel_module_serves_a_local_port(serving: dict, tmp_path: pathlib.Path) -> None:
    (listen,) = _free_ports(1)
    argv = [sys.executable, "-m", "determined.cli.tunnel", "--listener", str(listen), "--auth"]
    env = _cli_env(serving["url"]) | {"DET_CONFIG_DIR": str(tmp_path)}
    service = f"{serving['task']}:{serving['tcp']}"
    with subprocess.Popen([*argv, serving["url"], service], env=env, text=True) as proc:
        try:
            _echo_through(listen, b"Hello, Server", proc)
            _echo_through(listen, bytes(range(256)) * 512, proc)
        finally:
            proc.terminate()


def test_det_e_create_publishes_the_first_trials_port(
    module_master: Any, tmp_path: pathlib.Path
) -> None:
    http_port, tcp_port, open_port = _free_ports(3)
    (listen,) = _free_ports(1)
    context = tmp_path / "context"
    context.mkdir()
    (context / "servers.py").write_text(SERVERS)
    (tmp_path / "exp.yaml").write_text(yaml.safe_dump(_config(http_port, tcp_port, open_port)))
    det = pathlib.Path(sys.executable).parent / "det"
    argv = [str(det), "e", "create", str(tmp_path / "exp.yaml"), str(context)]
    argv += ["-f", "-p", f"{listen}:{tcp_port}"]
    env = _cli_env(module_master.url) | {"DET_CONFIG_DIR": str(tmp_path / "config")}
    api = module_master.api()
    with subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None
        exp_id = None
        try:
            for line in proc.stdout:
                found = re.search(r"Created experiment (\d+)", line)
                if found:
                    exp_id = int(found.group(1))
                if "Servers started" in line:
                    break
            assert exp_id is not None
            _echo_through(listen, b"published", proc)
        finally:
            if exp_id is not None:
                api.post(f"/api/v1/experiments/{exp_id}/kill")
            proc.terminate()


def test_ports_end_with_the_trial(module_master: Any, tmp_path: pathlib.Path) -> None:
    serving = _serving(module_master, tmp_path)
    url = f"{serving['url']}/proxy/{serving['task']}:{serving['http']}/"
    assert requests.get(url, headers=serving["headers"], timeout=30).status_code == 200
    api = serving["api"]
    api.post(f"/api/v1/experiments/{serving['exp_id']}/kill")
    api.wait_experiment(serving["exp_id"])
    api.wait_for(
        lambda: requests.get(url, headers=serving["headers"], timeout=30).status_code == 404,
        30,
        "the port to be withdrawn",
    )
    answer = requests.get(url, headers=serving["headers"], timeout=30)
    assert "not found" in answer.text


TAKE_TURNS = r"""
import http.server, os, pathlib, sys, threading
port, marker_dir = int(sys.argv[1]), pathlib.Path(sys.argv[2])
class Ok(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")
server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Ok)
threading.Thread(target=server.serve_forever, daemon=True).start()
print("Servers started", flush=True)
while not (marker_dir / os.environ["DET_TRIAL_ID"]).exists():
    threading.Event().wait(0.1)
"""


def test_trials_on_one_machine_take_turns_on_a_port(
    module_master: Any, tmp_path: pathlib.Path
) -> None:
    """Two processes cannot listen on one port: a trial whose port another trial holds waits for
    it (its log says so), and a kill meanwhile ends it unlaunched."""
    (port,) = _free_ports(1)
    context = tmp_path / "context"
    context.mkdir()
    (context / "serve.py").write_text(TAKE_TURNS)
    markers = tmp_path / "markers"
    markers.mkdir()
    config = {
        "name": "take-turns",
        "entrypoint": f"python3 serve.py {port} {markers}",
        "searcher": {"name": "grid", "metric": "x", "max_concurrent_trials": 3},
        "hyperparameters": {"n": {"type": "categorical", "vals": [1, 2, 3]}},
        "resources": {"slots_per_trial": 0},
        "max_restarts": 0,
        "environment": {"proxy_ports": [{"proxy_port": port}]},
    }
    api = module_master.api()
    exp_id = api.create_experiment(config, context)

    def by_log() -> tuple[list[dict], list[dict]]:
        trials = api.trials(exp_id)
        logs = {t["id"]: "".join(api.logs(t["id"])) for t in trials}
        serving = [t for t in trials if "Servers started" in logs[t["id"]]]
        waiting = [t for t in trials if "waits for proxy ports" in logs[t["id"]]]
        return serving, waiting

    api.wait_for(lambda: (s := by_log()) and len(s[0]) == 1 and len(s[1]) == 2, 120, "1 + 2")
    (first,), waiting = by_log()
    url = f"{module_master.url}/proxy/{first['taskId']}:{port}/"
    headers = {"Authorization": f"Bearer {module_master.login('determined')}"}
    assert requests.get(url, headers=headers, timeout=30).status_code == 200
    (markers / str(first["id"])).write_text("stop")
    second = api.wait_for(
        lambda: next((t for t in by_log()[0] if t["id"] != first["id"]), None), 120, "a turn"
    )
    assert second["id"] in {t["id"] for t in waiting}
    url = f"{module_master.url}/proxy/{second['taskId']}:{port}/"
    api.wait_for(lambda: requests.get(url, headers=headers, timeout=30).status_code == 200, 30)
    # the third still waits; a kill ends it without a launch
    api.post(f"/api/v1/experiments/{exp_id}/kill")
    assert api.wait_experiment(exp_id, timeout=60) == "STATE_CANCELED"
    serving, _ = by_log()
    assert {t["id"] for t in serving} == {first["id"], second["id"]}
