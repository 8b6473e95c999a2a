"""``det notebook`` and ``/api/v1/notebooks`` on a real master (SQLite, loopback port): JupyterLab
runs as a task behind the master's authenticated proxy, in the context directory, and is killed
after its idle timeout unless Jupyter is busy (a kernel runs)."""

from __future__ import annotations

import json
import pathlib
import time
import uuid
from collections.abc import Callable
from typing import Any

import httpx
import pytest
import websockets.sync.client
from cli.harness import Det

from determined.client import Client, Session

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.fixture
def det(
    det_master: Any,
    tmp_path: pathlib.Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> Det:
    """``det`` pointed at the module's master, with a private token cache (user ``determined``)."""
    for name in ("DET_USER", "DET_PASS", "DET_USER_TOKEN", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DET_MASTER", det_master.url)
    monkeypatch.setenv("DET_CONFIG_DIR", str(tmp_path / "det-config"))
    return Det(det_master.url, tmp_path / "det-config", capsys)


@pytest.fixture
def user(det_master: Any) -> Session:
    """The ``determined`` user's session: the owner of the notebooks ``det`` starts."""
    return det_master.session("determined")  # type: ignore[no-any-return]


@pytest.fixture
def context(tmp_path: pathlib.Path) -> pathlib.Path:
    path = tmp_path / "context"
    path.mkdir()
    (path / "data.txt").write_text("notebook context file\n")
    return path


def wait_for(predicate: Callable[[], Any], what: str, timeout: float = 120.0) -> Any:
    """Poll ``predicate`` until it is truthy (AssertionError naming ``what`` on timeout)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def proxied(url: str, session: Session | None, method: str = "GET", **kw: Any) -> httpx.Response:
    headers = {"Authorization": f"Bearer {session.token}"} if session is not None else {}
    return httpx.request(method, url, headers=headers, timeout=30, trust_env=False, **kw)


def run_in_kernel(url: str, session: Session, code: str) -> str:
    """Start a kernel through the proxy, run ``code`` over its WebSocket channels (Jupyter's
    messaging protocol), stop the kernel; the code's stdout."""
    browser = httpx.Client(
        headers={"Authorization": f"Bearer {session.token}"}, timeout=60, trust_env=False
    )
    assert browser.get(url + "lab").status_code == 200  # sets the _xsrf cookie
    xsrf = {"X-XSRFToken": browser.cookies["_xsrf"]}
    started = browser.post(url + "api/kernels", json={"name": "python3"}, headers=xsrf)
    assert started.status_code in (200, 201), started.text
    kernel_id = started.json()["id"]
    msg_id = uuid.uuid4().hex
    request = {
        "header": {"msg_id": msg_id, "msg_type": "execute_request", "username": "test",
                   "session": uuid.uuid4().hex, "version": "5.3", "date": ""},
        "parent_header": {}, "metadata": {}, "buffers": [], "channel": "shell",
        "content": {"code": code, "silent": False, "store_history": False,
                    "user_expressions": {}, "allow_stdin": False, "stop_on_error": True},
    }  # fmt: skip
    ws_url = url.replace("http://", "ws://") + f"api/kernels/{kernel_id}/channels"
    out = []
    headers = {"Authorization": f"Bearer {session.token}"}
    with websockets.sync.client.connect(ws_url, additional_headers=headers) as ws:
        ws.send(json.dumps(request))
        while True:
            message = json.loads(ws.recv(timeout=120))
            if message.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind = message["header"]["msg_type"]
            if kind == "stream":
                out.append(message["content"]["text"])
            elif kind == "error":
                raise AssertionError(message["content"])
            elif kind == "status" and message["content"]["execution_state"] == "idle":
                break
    browser.delete(url + f"api/kernels/{kernel_id}", headers=xsrf)
    return "".join(out)


def notebook(session: Session, notebook_id: str) -> dict[str, Any]:
    return dict(Client(session).notebooks.get(notebook_id)["notebook"])


def terminated(session: Session, notebook_id: str, timeout: float = 120.0) -> dict[str, Any]:
    return dict(
        wait_for(
            lambda: (n := notebook(session, notebook_id))["state"] == "STATE_TERMINATED" and n,
            f"notebook {notebook_id} to terminate",
            timeout,
        )
    )


def test_a_notebook_serves_its_context_behind_the_authenticated_proxy(
    det: Det, det_master: Any, user: Session, context: pathlib.Path
) -> None:
    out = det.ok("notebook", "start", "-c", str(context), "--no-browser")
    url = out.split("Jupyter Notebook is running at: ", 1)[1].split()[0]
    notebook_id = out.split("Launched notebook (id: ", 1)[1].split(")")[0]
    assert url == f"{det_master.url}/proxy/{notebook_id}/"

    status = proxied(url + "api/status", user)
    assert status.status_code == 200, status.text
    assert "started" in status.json()
    assert proxied(url + "api/status", None).status_code == 401

    # The context is the notebook's working directory (Jupyter's root).
    listing = proxied(url + "api/contents/", user).json()
    assert [f["name"] for f in listing["content"]] == ["data.txt"]
    data = proxied(url + "api/contents/data.txt", user).json()
    assert data["content"] == "notebook context file\n"

    # A kernel, over the proxied WebSocket, runs in the context directory too.
    assert run_in_kernel(url, user, "print(open('data.txt').read().upper())") == (
        "NOTEBOOK CONTEXT FILE\n\n"
    )

    record = notebook(user, notebook_id)
    assert record["state"] == "STATE_RUNNING" and record["isReady"] is True
    assert record["serviceAddress"] == f"/proxy/{notebook_id}/"
    listed = det.ok("notebook", "list")
    assert notebook_id in listed and "RUNNING" in listed
    assert notebook_id in det.ok("notebook", "list", "-q")
    config = det.ok("notebook", "config", notebook_id[:8])
    assert "notebook_idle_type: kernels_or_terminals" in config
    logs = det.ok("notebook", "logs", notebook_id)
    assert "jupyterlab" in logs.lower()
    # On the master's own host JupyterLab listens on loopback only, with no token of its own.
    assert "--ip=127.0.0.1" in logs and "--IdentityProvider.token=" in logs

    assert f"Killed notebook {notebook_id}" in det.ok("notebook", "kill", notebook_id[:8])
    ended = terminated(user, notebook_id)
    assert proxied(url + "api/status", user).status_code == 404
    code, _, err = det.run("notebook", "open", notebook_id)
    assert code == 1 and "has ended" in err
    assert ended["endTime"]


def test_an_idle_notebook_is_killed_and_a_busy_one_is_not(
    det: Det, user: Session, context: pathlib.Path
) -> None:
    """All have a 5 s idle timeout; one runs a kernel (busy for ``kernels_or_terminals``) until
    the idle ones have been killed, then stops its kernel and is killed in turn. The third uses
    ``notebook_idle_type: activity``: the master's own look at Jupyter's status is no activity."""

    def start(*config: str) -> str:
        argv = ["notebook", "start", "-d", "-c", str(context), "--config", "idle_timeout=5s"]
        for item in config:
            argv += ["--config", item]
        return det.ok(*argv).strip()

    idle_id, busy_id = start(), start()
    activity_id = start("notebook_idle_type=activity")
    busy = wait_for(lambda: (n := notebook(user, busy_id))["isReady"] and n, "notebook ready")
    base = det.url + busy["serviceAddress"]
    # As the browser does: JupyterLab's page sets the _xsrf cookie that API writes must echo.
    browser = httpx.Client(
        headers={"Authorization": f"Bearer {user.token}"}, timeout=30, trust_env=False
    )
    assert browser.get(base + "lab").status_code == 200
    xsrf = {"X-XSRFToken": browser.cookies["_xsrf"]}
    started = browser.post(base + "api/kernels", json={"name": "python3"}, headers=xsrf)
    assert started.status_code in (200, 201), started.text
    kernel_id = started.json()["id"]

    for ended_id in (idle_id, activity_id):
        ended = terminated(user, ended_id)
        assert "idle timeout of 5s" in ended["exitStatus"]
        logs = "".join(e.get("log") or "" for e in Client(user).tasks.logs(ended_id))
        assert "ready: serving at" in logs  # it served, then idled: not killed while starting
    assert notebook(user, busy_id)["state"] == "STATE_RUNNING"  # its kernel kept it alive

    deleted = browser.delete(base + f"api/kernels/{kernel_id}", headers=xsrf)
    assert deleted.status_code == 204, deleted.text
    busy_end = terminated(user, busy_id)
    assert "idle timeout of 5s" in busy_end["exitStatus"]


def test_bad_requests_name_the_field(det: Det, user: Session) -> None:
    api = Client(user)
    code, _, err = det.run("notebook", "start", "--config", "notebook_idle_type=never")
    assert code == 1 and "notebook_idle_type" in err
    code, _, err = det.run("notebook", "start", "--config", "idle_timeout=soon")
    assert code == 1 and "idle_timeout" in err
    answer = api.notebooks.launch(config={"idle_timeout": "5m"}, preview=True)
    assert answer["notebook"]["id"] == "" and answer["notebook"]["username"] == "determined"
    preview = answer["config"]
    assert preview["notebook_idle_type"] == "kernels_or_terminals"
    assert preview["resources"]["slots"] == 1
    before = len(api.notebooks.list()["notebooks"])
    shown = det.ok("notebook", "start", "--preview", "-v", "/data:/data", "--config", "x=1")
    assert "notebook_idle_type: kernels_or_terminals" in shown and "host_path: /data" in shown
    code, _, err = det.run("notebook", "start", "-v", "nocolon")
    assert code == 1 and "--volume" in err
    assert len(api.notebooks.list()["notebooks"]) == before  # neither started a notebook
    code, _, err = det.run("notebook", "kill", "00000000-0000-4000-8000-000000000000")
    assert code == 1 and "not found" in err
