"""Webhooks (``/api/v1/webhooks``) against a real master and a real HTTP receiver: experiment state
changes (Determined's JSON event and Slack's message), log-pattern triggers (once per task, at the
URL the webhook has when the line is stored), custom alerts of trials naming a SPECIFIC webhook,
the test route, who may manage which webhooks, and refusals naming the field."""

from __future__ import annotations

import hashlib
import hmac
import http.server
import json
import threading
from typing import Any

import pytest
import requests
import yaml
from master.conftest import TRIAL_SCRIPT, Client, context_files, exp_config, wait_for

from determined import client as det_client

ALERT_TRIAL = (
    r"""
import json, os, requests
info = json.load(open(os.environ["DET_CLUSTER_INFO"]))
H = {"Grpc-Metadata-x-allocation-token": "Bearer " + info["session_token"]}
trial = info["trial_info"]
body = {"data": {"title": "end of main", "description": "all done", "level": "LOG_LEVEL_WARNING"},
        "experimentId": trial["experiment_id"], "trialId": trial["trial_id"]}
r = requests.post(info["master_url"] + "/api/v1/webhooks/custom", json=body, headers=H)
r.raise_for_status()
"""
    + TRIAL_SCRIPT
)


SIGNING_KEY = "test-signing-key"


class Receiver:
    """An HTTP server on a free loopback port recording every POST: (path, headers, JSON body)."""

    def __init__(self) -> None:
        self.posts: list[tuple[str, dict[str, str], Any]] = []
        self.raw: list[bytes] = []
        self.answers: dict[str, list[int]] = {}
        """Statuses to answer per path, in order (then 200)."""
        self.lock = threading.Lock()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                with receiver.lock:
                    receiver.posts.append((self.path, dict(self.headers), json.loads(raw)))
                    receiver.raw.append(raw)
                    queued = receiver.answers.get(self.path) or [200]
                    status = queued.pop(0) if len(queued) > 1 else queued[0]
                self.send_response(status)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def bodies(self, path: str) -> list[Any]:
        with self.lock:
            return [body for p, _, body in self.posts if p == path]

    def wait(self, path: str, count: int = 1) -> list[Any]:
        return wait_for(  # type: ignore[no-any-return]
            lambda: len(self.bodies(path)) >= count and self.bodies(path),
            60,
            f"{count} post(s) to {path}",
            lambda: f"got {[p for p, _, _ in self.posts]}",
        )

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def basic_master(module_db_url: str, make_module_master: Any) -> Any:
    """Upstream's open-source master (basic authorization), on SQLite and on PostgreSQL."""
    return make_module_master(
        module_db_url, security={"authz": {"type": "basic"}}, webhooks={"signing_key": SIGNING_KEY}
    )


@pytest.fixture(scope="module")
def admin(basic_master: Any) -> Client:
    return Client(basic_master.url).login("admin")


@pytest.fixture
def receiver() -> Any:
    r = Receiver()
    yield r
    r.close()


@pytest.fixture
def hooks(admin: Client) -> Any:
    """``hooks(body)`` creates a webhook (as admin) and deletes it after the test."""
    created: list[int] = []

    def make(**body: Any) -> dict[str, Any]:
        r = admin.request("POST", "/api/v1/webhooks", json=body)
        assert r.status_code == 200, r.text
        hook = r.json()["webhook"]
        created.append(hook["id"])
        return hook  # type: ignore[no-any-return]

    yield make
    for webhook_id in created:
        admin.request("DELETE", f"/api/v1/webhooks/{webhook_id}")


def _trigger(kind: str, **condition: Any) -> dict[str, Any]:
    return {"triggerType": f"TRIGGER_TYPE_{kind}", "condition": condition}


def _hook_body(url: str, *triggers: dict[str, Any], **extra: Any) -> dict[str, Any]:
    body = {
        "url": url,
        "webhookType": "WEBHOOK_TYPE_DEFAULT",
        "mode": "WEBHOOK_MODE_WORKSPACE",
        "name": "",
        "triggers": list(triggers),
    }
    body.update(extra)
    return body


def _create_experiment(
    api: Client, config: dict[str, Any], script: str = TRIAL_SCRIPT, project_id: int | None = None
) -> int:
    body: dict[str, Any] = {
        "config": yaml.safe_dump(config),
        "modelDefinition": context_files({"trial.py": script}),
        "activate": True,
    }
    if project_id is not None:
        body["projectId"] = project_id
    return int(api.post("/api/v1/experiments", body)["experiment"]["id"])


def _workspace_and_project(api: Client, name: str) -> tuple[int, int]:
    ws = int(api.post("/api/v1/workspaces", {"name": name})["workspace"]["id"])
    body = {"name": name, "workspaceId": ws}
    project = int(api.post(f"/api/v1/workspaces/{ws}/projects", body)["project"]["id"])
    return ws, project


def test_state_change_posts_json_and_slack(admin: Client, receiver: Receiver, hooks: Any) -> None:
    completed = _trigger("EXPERIMENT_STATE_CHANGE", state="COMPLETED")
    plain = hooks(**_hook_body(receiver.url + "/plain", completed))
    assert plain["webhookType"] == "WEBHOOK_TYPE_DEFAULT" and plain["workspaceId"] == 0
    assert plain["triggers"][0]["condition"] == {"state": "COMPLETED"}
    assert plain["triggers"][0]["webhookId"] == plain["id"]
    hooks(**_hook_body(receiver.url + "/slack", completed, webhookType="WEBHOOK_TYPE_SLACK"))
    errored = hooks(
        **_hook_body(receiver.url + "/error", _trigger("EXPERIMENT_STATE_CHANGE", state="ERROR"))
    )
    assert any(h["id"] == errored["id"] for h in admin.get("/api/v1/webhooks")["webhooks"])

    exp_id = _create_experiment(admin, exp_config(name="hooked", hyperparameters={"steps": 1}))
    admin.wait_state(exp_id, "STATE_COMPLETED")
    (event,) = receiver.wait("/plain")
    assert event["event_type"] == "EXPERIMENT_STATE_CHANGE"
    assert event["condition"] == {"state": "COMPLETED"}
    exp = event["event_data"]["experiment"]
    assert (exp["id"], exp["state"], exp["name"]) == (exp_id, "COMPLETED", "hooked")
    assert exp["workspace"] == "Uncategorized" and exp["slots_per_trial"] == 1
    index = next(i for i, p in enumerate(receiver.posts) if p[0] == "/plain")
    headers, raw = receiver.posts[index][1], receiver.raw[index]
    stamp = headers["X-Determined-AI-Signature-Timestamp"]
    expected = hmac.new(SIGNING_KEY.encode(), f"{stamp},".encode() + raw, hashlib.sha256)
    assert headers["X-Determined-AI-Signature"] == expected.hexdigest()

    (slack,) = receiver.wait("/slack")
    assert slack["blocks"] == [
        {
            "type": "section",
            "text": {"type": "plain_text", "text": "Your experiment completed successfully 🎉"},
        }
    ]
    attachment = slack["attachments"][0]
    assert attachment["color"] == "#13B670"
    assert attachment["blocks"][0]["text"]["text"] == f"✅ hooked (#{exp_id})"
    assert attachment["blocks"][0]["fields"][:2] == [
        {"type": "mrkdwn", "text": "*Status*: Completed"},
        {"type": "mrkdwn", "text": "*Duration*: 0h 0min"},
    ]
    assert receiver.bodies("/error") == []


def test_log_pattern_fires_once_per_task_at_the_edited_url(
    admin: Client, receiver: Receiver, hooks: Any
) -> None:
    pattern = _trigger("TASK_LOG", regex=r"crashing.*on purpose")
    plain = hooks(**_hook_body(receiver.url + "/old", pattern))
    hooks(**_hook_body(receiver.url + "/slack", pattern, webhookType="WEBHOOK_TYPE_SLACK"))
    hooks(**_hook_body(receiver.url + "/never", _trigger("TASK_LOG", regex="no line says this")))
    r = admin.request(
        "PATCH", f"/api/v1/webhooks/{plain['id']}", json={"url": receiver.url + "/new"}
    )
    assert r.status_code == 200, r.text
    listed = {h["id"]: h for h in admin.get("/api/v1/webhooks")["webhooks"]}
    assert listed[plain["id"]]["url"] == receiver.url + "/new"

    # The trial prints the matching line once, then exits 3; max_restarts 1 runs it twice in one
    # task: the trigger still fires once.
    config = exp_config(hyperparameters={"crash": 3}, max_restarts=1)
    exp_id = _create_experiment(admin, config)
    admin.wait_state(exp_id, "STATE_ERROR")
    (event,) = receiver.wait("/new")
    assert event["event_type"] == "TASK_LOG"
    assert event["condition"] == {"regex": r"crashing.*on purpose"}
    (trial,) = admin.trials(exp_id)
    assert event["event_data"]["task_log"]["task_id"] == trial["taskId"]
    assert "crashing on purpose" in event["event_data"]["task_log"]["triggering_log"]
    (slack,) = receiver.wait("/slack")
    text = slack["blocks"][0]["text"]["text"]
    assert f"Experiment ID `{exp_id}`, Trial ID `{trial['id']}`" in text
    assert "This log matched the regex" in text
    assert receiver.bodies("/old") == [] and receiver.bodies("/never") == []
    assert len(receiver.bodies("/new")) == 1


def test_specific_webhooks_and_custom_alerts(admin: Client, receiver: Receiver, hooks: Any) -> None:
    ws, project = _workspace_and_project(admin, "hooks-specific")
    alert = _trigger("CUSTOM")
    done = _trigger("EXPERIMENT_STATE_CHANGE", state="COMPLETED")
    specific = {"mode": "WEBHOOK_MODE_SPECIFIC", "workspaceId": ws}
    hooks(**_hook_body(receiver.url + "/alerts", alert, name="alerts", **specific))
    by_id = hooks(**_hook_body(receiver.url + "/by-id", done, name="by-id", **specific))
    elsewhere = hooks(
        **_hook_body(
            receiver.url + "/elsewhere", done, name="x", mode="WEBHOOK_MODE_SPECIFIC", workspaceId=1
        )
    )
    hooks(**_hook_body(receiver.url + "/unnamed", done, name="unnamed", **specific))

    named = {"webhooks": {"webhook_name": ["alerts"], "webhook_id": [by_id["id"], elsewhere["id"]]}}
    exp_id = _create_experiment(
        admin, exp_config(integrations=named), ALERT_TRIAL, project_id=project
    )
    control = {"webhooks": {"webhook_name": ["abc"]}}
    control_id = _create_experiment(
        admin, exp_config(integrations=control), ALERT_TRIAL, project_id=project
    )
    admin.wait_state(exp_id, "STATE_COMPLETED")
    admin.wait_state(control_id, "STATE_COMPLETED")
    (event,) = receiver.wait("/alerts")
    assert event["event_type"] == "CUSTOM"
    assert event["event_data"]["custom_data"] == {
        "title": "end of main",
        "description": "all done",
        "level": "WARNING",
    }
    (trial,) = admin.trials(exp_id)
    assert event["event_data"]["experiment"]["id"] == exp_id
    assert event["event_data"]["experiment"]["trial_id"] == trial["id"]
    (completed,) = receiver.wait("/by-id")
    assert completed["event_data"]["experiment"]["id"] == exp_id
    # the control experiment names neither; the workspace-1 webhook is out of scope
    assert len(receiver.bodies("/alerts")) == 1 and len(receiver.bodies("/by-id")) == 1
    assert receiver.bodies("/elsewhere") == [] and receiver.bodies("/unnamed") == []

    r = admin.request(
        "POST",
        "/api/v1/webhooks",
        json=_hook_body(receiver.url, alert, workspaceId=ws),
    )
    assert r.status_code == 400 and "mode SPECIFIC" in r.json()["error"]["error"]


def test_test_route(admin: Client, receiver: Receiver, hooks: Any) -> None:
    done = _trigger("EXPERIMENT_STATE_CHANGE", state="COMPLETED")
    plain = hooks(**_hook_body(receiver.url + "/ping", done))
    slack = hooks(
        **_hook_body(receiver.url + "/ping-slack", done, webhookType="WEBHOOK_TYPE_SLACK")
    )
    assert admin.post(f"/api/v1/webhooks/{plain['id']}/test") == {"completed": True}
    assert admin.post(f"/api/v1/webhooks/{slack['id']}/test") == {"completed": True}
    assert receiver.bodies("/ping")[0]["event_data"] == {"data": "test"}
    assert receiver.bodies("/ping-slack")[0]["blocks"][0]["text"]["text"] == "test"
    dead = hooks(**_hook_body("http://127.0.0.1:9/", done))
    r = admin.request("POST", f"/api/v1/webhooks/{dead['id']}/test")
    assert r.status_code == 400 and f"webhook {dead['id']}" in r.json()["error"]["error"]


def _denied(r: requests.Response, status: int = 400) -> bool:
    return r.status_code == status and "permission denied" in r.json()["error"]["error"]


def test_who_may_manage_webhooks(basic_master: Any, admin: Client, hooks: Any) -> None:
    det_client.Client(basic_master.session("admin")).users.create(
        {"username": "hook-owner", "active": True}, det_client.hash_password("")
    )
    user = Client(basic_master.url).login("determined")
    owner = Client(basic_master.url).login("hook-owner")
    done = _trigger("EXPERIMENT_STATE_CHANGE", state="COMPLETED")
    # Upstream's basic authorization refuses with a plain error (400 here), not a 403.
    r = user.request("POST", "/api/v1/webhooks", json=_hook_body("http://localhost", done))
    assert _denied(r) and "global webhooks" in r.json()["error"]["error"]
    global_hook = hooks(**_hook_body("http://localhost", done))
    assert any(h["id"] == global_hook["id"] for h in user.get("/api/v1/webhooks")["webhooks"])

    ws = int(owner.post("/api/v1/workspaces", {"name": "hook-owner-ws"})["workspace"]["id"])
    own = owner.post("/api/v1/webhooks", _hook_body("http://localhost", done, workspaceId=ws))
    own_id = own["webhook"]["id"]
    r = user.request(
        "POST", "/api/v1/webhooks", json=_hook_body("http://localhost", done, workspaceId=ws)
    )
    assert _denied(r) and f"workspace {ws}" in r.json()["error"]["error"]
    assert any(h["id"] == own_id for h in owner.get("/api/v1/webhooks")["webhooks"])
    assert not any(h["id"] == own_id for h in user.get("/api/v1/webhooks")["webhooks"])
    assert {own_id, global_hook["id"]} <= {
        h["id"] for h in admin.get("/api/v1/webhooks")["webhooks"]
    }
    assert _denied(user.request("DELETE", f"/api/v1/webhooks/{own_id}"))
    assert _denied(user.request("DELETE", f"/api/v1/webhooks/{global_hook['id']}"))
    assert _denied(owner.request("DELETE", f"/api/v1/webhooks/{global_hook['id']}"))
    r = user.request("PATCH", f"/api/v1/webhooks/{own_id}", json={"url": "http://example.com"})
    assert _denied(r)
    assert owner.request("DELETE", f"/api/v1/webhooks/{own_id}").status_code == 200
    assert admin.request("DELETE", f"/api/v1/webhooks/{own_id}").status_code == 404
    # Deleting a workspace deletes its webhooks.
    again = owner.post("/api/v1/webhooks", _hook_body("http://localhost", done, workspaceId=ws))
    assert owner.request("DELETE", f"/api/v1/workspaces/{ws}").status_code == 200
    wait_for(
        lambda: all(
            h["id"] != again["webhook"]["id"] for h in admin.get("/api/v1/webhooks")["webhooks"]
        ),
        30,
        "the deleted workspace's webhook to go",
    )


@pytest.mark.parametrize(
    ("change", "status", "fragment"),
    [
        ({"url": ""}, 400, "url:"),
        ({"url": "not a url"}, 400, "url:"),
        ({"webhookType": "WEBHOOK_TYPE_UNSPECIFIED"}, 400, "webhookType:"),
        ({"mode": "WEBHOOK_MODE_SOMETIMES"}, 400, "mode:"),
        ({"triggers": []}, 400, "triggers:"),
        ({"triggers": [{"triggerType": "TRIGGER_TYPE_BOGUS"}]}, 400, "triggers[0].triggerType:"),
        ({"triggers": [_trigger("TASK_LOG")]}, 400, "triggers[0].condition:"),
        ({"triggers": [_trigger("TASK_LOG", regex="(")]}, 400, "triggers[0].condition.regex:"),
        (
            {"triggers": [_trigger("EXPERIMENT_STATE_CHANGE", state="DONE")]},
            400,
            "triggers[0].condition.state:",
        ),
        ({"workspaceId": "two"}, 400, "workspaceId:"),
        ({"workspaceId": 999999}, 404, "workspaceId:"),
    ],
)
def test_bad_input_names_the_field(
    admin: Client, change: dict[str, Any], status: int, fragment: str
) -> None:
    body = _hook_body("http://localhost", _trigger("EXPERIMENT_STATE_CHANGE", state="COMPLETED"))
    body.update(change)
    r = admin.request("POST", "/api/v1/webhooks", json=body)
    assert r.status_code == status, r.text
    assert fragment in r.json()["error"]["error"]


def test_unknown_webhook_and_bad_patch(admin: Client, hooks: Any) -> None:
    for method in ("DELETE", "PATCH"):
        r = admin.request(method, "/api/v1/webhooks/424242", json={"url": "http://localhost"})
        assert r.status_code == 404 and "webhook 424242" in r.json()["error"]["error"]
    assert admin.request("POST", "/api/v1/webhooks/424242/test").status_code == 404
    hook = hooks(**_hook_body("http://localhost", _trigger("CUSTOM"), mode="WEBHOOK_MODE_SPECIFIC"))
    r = admin.request("PATCH", f"/api/v1/webhooks/{hook['id']}", json={"url": "ftp://x"})
    assert r.status_code == 400 and "url:" in r.json()["error"]["error"]
    assert requests.get(admin.url + "/api/v1/webhooks", timeout=10).status_code == 401


def test_retries_and_events_left_queued(basic_master: Any, receiver: Receiver) -> None:
    """A 5xx is tried again, a 4xx is not; events a stopped master left queued are sent at start."""
    from sqlalchemy import func, select

    from determined.master.db._webhook_models import WebhookEvent

    receiver.answers["/flaky"] = [503, 200]
    receiver.answers["/gone"] = [404, 200]
    with basic_master.db.write() as session:
        for path in ("/flaky", "/gone", "/queued"):
            session.add(WebhookEvent(url=receiver.url + path, payload=json.dumps({"p": path})))

    def queued() -> int:
        with basic_master.db.read() as session:
            return int(session.scalar(select(func.count()).select_from(WebhookEvent)) or 0)

    basic_master.manager.webhooks.shipper.resend_pending()
    assert receiver.wait("/flaky", 2) == [{"p": "/flaky"}, {"p": "/flaky"}]
    assert receiver.wait("/queued") == [{"p": "/queued"}]
    wait_for(lambda: queued() == 0, 30, "the delivered events to leave the queue")
    assert receiver.bodies("/gone") == [{"p": "/gone"}]


def test_rbac_refuses_with_403(make_master: Any) -> None:
    """With RBAC a refusal is a 403, and a WorkspaceAdmin manages its workspace's webhooks."""
    master = make_master()
    admin = Client(master.url).login("admin")
    users = det_client.Client(master.session("admin")).users
    users.create({"username": "ws-admin", "active": True}, det_client.hash_password(""))
    user_id = next(u["id"] for u in users.list()["users"] if u["username"] == "ws-admin")
    ws_admin = Client(master.url).login("ws-admin")
    done = _trigger("EXPERIMENT_STATE_CHANGE", state="COMPLETED")
    r = ws_admin.request("POST", "/api/v1/webhooks", json=_hook_body("http://localhost", done))
    assert _denied(r, 403)
    ws = int(admin.post("/api/v1/workspaces", {"name": "rbac-hooks"})["workspace"]["id"])
    body = _hook_body("http://localhost", done, workspaceId=ws)
    assert _denied(ws_admin.request("POST", "/api/v1/webhooks", json=body), 403)
    grant = {
        "userId": user_id,
        "roleAssignment": {"role": {"roleId": 2}, "scopeWorkspaceId": ws},  # WorkspaceAdmin
    }
    admin.post("/api/v1/roles/add-assignments", {"userRoleAssignments": [grant]})
    hook = ws_admin.post("/api/v1/webhooks", body)["webhook"]
    assert [h["id"] for h in ws_admin.get("/api/v1/webhooks")["webhooks"]] == [hook["id"]]
    assert ws_admin.request("DELETE", f"/api/v1/webhooks/{hook['id']}").status_code == 200
