"""A fake det master: a real HTTP server on a loopback port that answers the Core API's routes.

It records every request, answers each route of the trial protocol (``reference/core-api.md`` §2.2)
with a sensible default, and lets a test override any route's answer, hold a route until released, or
flip the preemption flag (long-polls wake at once). ``on_cluster`` writes a ClusterInfo file pointing
at it and sets ``DET_CLUSTER_INFO``, so ``det.core.init()`` runs as a managed trial.
"""

from __future__ import annotations

import dataclasses
import http.server
import json
import pathlib
import re
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import determined


@dataclasses.dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any


@dataclasses.dataclass
class Override:
    method: str
    pattern: re.Pattern[str]
    status: int
    body: Any
    times: int | None  # None: forever
    gate: threading.Event | None


class FakeMaster:
    """State and behaviour of the fake; ``url`` is where it listens."""

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self.batch_supported = True
        self.storage_id = 1
        self.best_validation: float | None = None
        self.checkpoints: dict[str, dict[str, Any]] = {}
        self.run_metadata: dict[int, dict[str, Any]] = {}
        self.early_exits: dict[int, str] = {}
        self._preempt = threading.Event()
        self._closing = threading.Event()
        self._changed = threading.Condition()
        self._overrides: list[Override] = []
        self._lock = threading.Lock()
        self._server: http.server.ThreadingHTTPServer | None = None
        self.url = ""

    # ---- test controls --------------------------------------------------------------------------
    def set_preempt(self, flag: bool = True) -> None:
        """Flip the preemption flag; pending long-polls answer at once when it becomes True."""
        if flag:
            self._preempt.set()
        else:
            self._preempt.clear()

    def override(
        self,
        method: str,
        path_regex: str,
        status: int = 200,
        body: Any = None,
        *,
        times: int | None = None,
        gate: threading.Event | None = None,
    ) -> None:
        """Answer ``method`` requests whose path fully matches ``path_regex`` with ``status``/``body``
        (``bytes`` are sent raw), at most ``times`` times. With ``gate`` the answer waits until the
        gate is set (``status=None`` then falls through to the default route)."""
        with self._lock:
            self._overrides.append(
                Override(method, re.compile(path_regex), status, body, times, gate)
            )

    def hold(self, method: str, path_regex: str, *, times: int | None = 1) -> threading.Event:
        """Make matching requests wait (then get their default answer) until the returned event is set."""
        gate = threading.Event()
        self.override(method, path_regex, status=0, times=times, gate=gate)
        return gate

    def find(self, method: str | None = None, path_regex: str = ".*") -> list[Request]:
        pattern = re.compile(path_regex)
        with self._lock:
            return [
                r
                for r in self.requests
                if (method is None or r.method == method) and pattern.fullmatch(r.path)
            ]

    def wait_for(self, predicate: Callable[[], Any], timeout: float = 10.0) -> Any:
        """Wait until ``predicate()`` is truthy (re-checked on every request and every 50 ms)."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                value = predicate()
                if value:
                    return value
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"timed out after {timeout} s waiting for {predicate}")
                self._changed.wait(min(left, 0.05))

    def metric_reports(self) -> list[dict[str, Any]]:
        """Every metrics report received, single or batched, in arrival order."""
        reports = []
        for r in self.find("POST", r"/api/v1/trials/\d+/metrics(/batch)?"):
            reports.extend(r.body["reports"] if r.path.endswith("/batch") else [r.body])
        return reports

    # ---- serving --------------------------------------------------------------------------------
    def _record(self, request: Request) -> None:
        with self._lock:
            self.requests.append(request)
        with self._changed:
            self._changed.notify_all()

    def _match_override(self, method: str, path: str) -> Override | None:
        with self._lock:
            for override in self._overrides:
                if override.method == method and override.pattern.fullmatch(path):
                    if override.times is not None:
                        override.times -= 1
                        if override.times <= 0:
                            self._overrides.remove(override)
                    return override
        return None

    def handle(self, request: Request) -> tuple[int, Any]:
        self._record(request)
        override = self._match_override(request.method, request.path)
        if override is not None:
            if override.gate is not None:
                override.gate.wait(30)
            if override.status:
                return override.status, override.body
        try:
            return self._default(request)
        finally:
            with self._changed:
                self._changed.notify_all()

    def _default(self, r: Request) -> tuple[int, Any]:
        m, p, body = r.method, r.path, r.body
        if m == "POST" and p == "/api/v1/runs/start":
            return 200, {"storageId": self.storage_id}
        if m == "POST" and re.fullmatch(r"/api/v1/trials/\d+/metrics", p):
            return 200, {}
        if m == "POST" and re.fullmatch(r"/api/v1/trials/\d+/metrics/batch", p):
            if not self.batch_supported:
                return 404, {"error": {"error": "Not Found"}}
            return 200, {}
        if m == "POST" and re.fullmatch(r"/api/v1/trials/\d+/(progress|runner/metadata)", p):
            return 200, {}
        match = re.fullmatch(r"/api/v1/trials/(\d+)/early_exit", p)
        if m == "POST" and match:
            trial_id = int(match.group(1))
            with self._lock:
                if trial_id in self.early_exits:
                    return 400, {"error": {"error": "early exit already reported"}}
                self.early_exits[trial_id] = body["reason"]
            return 200, {}
        if m == "GET" and re.fullmatch(
            r"/api/v1/experiments/\d+/searcher/best_searcher_validation_metric", p
        ):
            if self.best_validation is None:
                return 404, {"error": {"error": "no validation yet"}}
            return 200, {"metric": self.best_validation}
        match = re.fullmatch(r"/api/v1/runs/(\d+)/metadata", p)
        if match:
            run_id = int(match.group(1))
            if m == "POST":
                self.run_metadata[run_id] = body["metadata"]
            return 200, {"metadata": self.run_metadata.get(run_id, {})}
        match = re.fullmatch(r"/api/v1/trials/(\d+)", p)
        if m == "GET" and match:
            return 200, {"trial": {"id": int(match.group(1)), "latestValidation": None}}
        if p == "/api/v1/checkpoints" and m == "POST":
            with self._lock:
                self.checkpoints[body["uuid"]] = json.loads(json.dumps(body))
            return 200, {}
        if p == "/api/v1/checkpoints" and m == "PATCH":
            with self._lock:
                for entry in body["checkpoints"]:
                    if entry["uuid"] in self.checkpoints:
                        self.checkpoints[entry["uuid"]]["resources"] = entry["resources"][
                            "resources"
                        ]
            return 200, {}
        match = re.fullmatch(r"/api/v1/checkpoints/([^/]+)", p)
        if m == "GET" and match:
            with self._lock:
                checkpoint = self.checkpoints.get(match.group(1))
            if checkpoint is None:
                return 404, {"error": {"error": f"checkpoint {match.group(1)} not found"}}
            return 200, {"checkpoint": checkpoint}
        if m == "GET" and re.fullmatch(r"/api/v1/allocations/[^/]+/signals/preemption", p):
            timeout = float(r.query.get("timeout_seconds", ["0"])[0])
            deadline = time.monotonic() + timeout
            while not self._preempt.is_set() and not self._closing.is_set():
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._preempt.wait(min(left, 0.05))
            return 200, {"preempt": self._preempt.is_set()}
        if m == "POST" and re.fullmatch(r"/api/v1/allocations/[^/]+/signals/ack_preemption", p):
            return 200, {}
        if m == "POST" and p in (
            "/api/v1/webhooks/custom",
            "/api/v1/trial-source-info",
            "/api/v1/task/logs",
        ):
            return 200, {}
        if m == "GET" and p == "/api/v1/master":
            return 200, {"clusterId": "fake-cluster", "version": "0.0.0"}
        return 404, {"error": {"error": f"no route {m} {p}"}}

    def start(self) -> None:
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _serve(self) -> None:
                parsed = urllib.parse.urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw else None
                request = Request(
                    self.command,
                    parsed.path,
                    urllib.parse.parse_qs(parsed.query),
                    {k: v for k, v in self.headers.items()},
                    body,
                )
                status, answer = fake.handle(request)
                data = answer if isinstance(answer, bytes) else json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _serve

            def log_message(self, format: str, *args: Any) -> None:
                pass

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        self._server = server
        self.url = f"http://127.0.0.1:{server.server_address[1]}"
        threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="fake-master",
            daemon=True,
        ).start()

    def stop(self) -> None:
        self._closing.set()
        with self._lock:
            for override in self._overrides:
                if override.gate is not None:
                    override.gate.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


@pytest.fixture
def fake_master() -> Iterator[FakeMaster]:
    """A started FakeMaster, stopped after the test."""
    fake = FakeMaster()
    fake.start()
    try:
        yield fake
    finally:
        fake.stop()


TRIAL_ID = 7
EXPERIMENT_ID = 3
TRIAL_RUN_ID = 2
ALLOCATION_ID = "task-1.alloc-1"
TASK_ID = "task-1"
TOKEN = "secret-allocation-token"


@dataclasses.dataclass
class OnCluster:
    """What ``on_cluster`` set up: the fake, the ClusterInfo it wrote, and the shared_fs root."""

    master: FakeMaster
    info: determined.ClusterInfo
    storage_path: pathlib.Path


def write_cluster_info(
    path: pathlib.Path,
    master_url: str,
    storage_path: pathlib.Path,
    *,
    config: dict[str, Any] | None = None,
    slot_ids: list[int] | None = None,
) -> determined.ClusterInfo:
    """Write a TRIAL ClusterInfo (shared_fs storage under ``storage_path``, single searcher) to ``path``."""
    experiment_config: dict[str, Any] = {
        "checkpoint_storage": {"type": "shared_fs", "host_path": str(storage_path)},
        "searcher": {"name": "single", "metric": "loss", "max_length": {"batches": 100}},
    }
    experiment_config.update(config or {})
    info = determined.ClusterInfo(
        master_url=master_url,
        cluster_id="fake-cluster",
        agent_id="agent-1",
        slot_ids=slot_ids if slot_ids is not None else [0],
        task_id=TASK_ID,
        allocation_id=ALLOCATION_ID,
        session_token=TOKEN,
        task_type="TRIAL",
        trial_info=determined.TrialInfo(
            trial_id=TRIAL_ID,
            experiment_id=EXPERIMENT_ID,
            trial_seed=1,
            hparams={"lr": 0.1},
            config=experiment_config,
            steps_completed=0,
            trial_run_id=TRIAL_RUN_ID,
            debug=False,
            inter_node_network_interface=None,
        ),
    )
    info.write(path)
    return info


def _clear_det_env(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name in list(os.environ):
        if name.startswith("DET_") or name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "TF_CONFIG"):
            monkeypatch.delenv(name, raising=False)


@pytest.fixture
def off_cluster(monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path) -> pathlib.Path:
    """No ClusterInfo and no launcher variables; ``XDG_DATA_HOME`` under tmp_path (returned)."""
    _clear_det_env(monkeypatch)
    data_home = tmp_path / "xdg-data"
    monkeypatch.setenv("XDG_DATA_HOME", str(data_home))
    return data_home


@pytest.fixture
def on_cluster(
    fake_master: FakeMaster, monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path
) -> OnCluster:
    """``det.core.init()`` runs as trial TRIAL_ID against the fake master, storing under tmp_path."""
    _clear_det_env(monkeypatch)
    # the trial's local TensorBoard directory is named for its (here fixed) allocation id
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    storage_path = tmp_path / "shared_fs"
    storage_path.mkdir()
    info = write_cluster_info(tmp_path / "info" / "cluster.json", fake_master.url, storage_path)
    monkeypatch.setenv("DET_CLUSTER_INFO", str(tmp_path / "info" / "cluster.json"))
    return OnCluster(fake_master, info, storage_path)
