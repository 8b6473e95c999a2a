"""``det webhook``: create, list, point at another URL, test (a real receiver) and delete webhooks
of a real master; a refused request's message reaches the user."""

from __future__ import annotations

import http.server
import json
import threading
from typing import Any

import pytest
from cli.harness import Det

ADMIN = ("-u", "admin")


@pytest.fixture
def receiver() -> Any:
    posts: list[tuple[str, Any]] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("content-length") or 0))
            posts.append((self.path, json.loads(raw)))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", posts
    server.shutdown()
    server.server_close()


def test_webhook_commands(det: Det, receiver: Any) -> None:
    url, posts = receiver
    out = det.ok(
        *ADMIN, "webhook", "create", url + "/a", "--type", "slack", "--state", "completed",
        "--log-regex", "Traceback", "--name", "cli-hook",
    )  # fmt: skip
    webhook_id = int(out.split()[-1])
    listed = det.ok(*ADMIN, "webhook", "list")
    assert "cli-hook" in listed and "SLACK" in listed and "TASK_LOG(regex=Traceback)" in listed
    (hook,) = [
        h for h in json.loads(det.ok(*ADMIN, "webhook", "ls", "--json")) if h["id"] == webhook_id
    ]
    assert hook["triggers"][0]["condition"] == {"state": "COMPLETED"}

    det.ok(*ADMIN, "webhook", "edit", str(webhook_id), "--url", url + "/b")
    assert "delivered" in det.ok(*ADMIN, "webhook", "test", str(webhook_id))
    assert posts == [
        ("/b", {"blocks": [{"type": "section", "text": {"type": "plain_text", "text": "test"}}]})
    ]

    code, _, err = det.run(*ADMIN, "webhook", "create", url, "--custom")
    assert code != 0 and "mode SPECIFIC" in err
    code, _, err = det.run(*ADMIN, "webhook", "create", url)
    assert code != 0 and "at least one trigger" in err
    det.ok(*ADMIN, "webhook", "rm", str(webhook_id))
    code, _, err = det.run(*ADMIN, "webhook", "delete", str(webhook_id))
    assert code != 0 and f"webhook {webhook_id} not found" in err
