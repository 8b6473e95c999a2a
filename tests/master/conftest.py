"""Fixtures for det-master tests: a real master per test (SQLite or PostgreSQL) on a free loopback
port, an authenticated HTTP client, and a small trial script that talks to the master with
``requests`` exactly like a Determined trial (core-api.md §2.2)."""

from __future__ import annotations

import base64
import time
from collections.abc import Callable
from typing import Any

import pytest
import requests
import yaml
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

WAIT_S = 60.0

TRIAL_SCRIPT = r"""
import json, os, pathlib, sys, time, uuid
import requests

info = json.load(open(os.environ["DET_CLUSTER_INFO"]))
trial = info["trial_info"]
hp = trial["hparams"]
master = info["master_url"]
alloc = info["allocation_id"]
H = {"Grpc-Metadata-x-allocation-token": "Bearer " + info["session_token"]}
T = trial["trial_id"]
RUN = trial["trial_run_id"]
storage = trial["config"]["checkpoint_storage"]["host_path"]

def post(path, body=None):
    r = requests.post(master + path, json=body, headers=H, timeout=30)
    if r.status_code >= 300:
        print("POST", path, r.status_code, r.text, file=sys.stderr)
        sys.exit(3)
    return r.json()

def get(path, **params):
    r = requests.get(master + path, params=params, headers=H, timeout=90)
    r.raise_for_status()
    return r.json()

def report(group, steps, metrics):
    post(f"/api/v1/trials/{T}/metrics", {"group": group, "metrics": {
        "trialId": T, "trialRunId": RUN, "stepsCompleted": steps,
        "metrics": {"avgMetrics": metrics}}})

def checkpoint(steps):
    sid = str(uuid.uuid4())
    d = pathlib.Path(storage) / sid
    d.mkdir(parents=True)
    (d / "state.json").write_text(json.dumps({"steps": steps}))
    meta = {"steps_completed": steps}
    (d / "metadata.json").write_text(json.dumps(meta))
    res = {p.name: str(p.stat().st_size) for p in d.iterdir()}
    post("/api/v1/checkpoints", {"uuid": sid, "taskId": info["task_id"], "allocationId": alloc,
         "reportTime": "2024-01-01T00:00:00Z", "resources": res, "metadata": meta,
         "state": "STATE_COMPLETED", "training": {}})
    return sid

start = 0
if info.get("latest_checkpoint"):
    start = json.loads((pathlib.Path(storage) / info["latest_checkpoint"] / "state.json").read_text())["steps"]
print(f"[rank=0] INFO: trial {T} run {RUN} starting at step {start} latest={info.get('latest_checkpoint')}")
print("some stderr line", file=sys.stderr)
post(f"/api/v1/allocations/{alloc}/ready")
if hp.get("pid_dir"):
    (pathlib.Path(hp["pid_dir"]) / f"{T}.{RUN}.pid").write_text(str(os.getpid()))

if hp.get("crash"):
    print("ERROR: crashing on purpose")
    sys.exit(int(hp["crash"]))

steps = int(hp.get("steps", 3))

def loss(step):
    base = float(T) if hp.get("loss_by_trial") else float(hp.get("base", 1.0))
    return base / step

for step in range(start + 1, steps + 1):
    report("training", step, {"loss": 1.0 / step, "epoch": step})
    if hp.get("validate_every") and step % int(hp["validate_every"]) == 0:
        report("validation", step, {"loss": loss(step), "batches": step})
    if hp.get("ckpt_every") and step % int(hp["ckpt_every"]) == 0 and step != steps:
        checkpoint(step)
    if hp.get("hang_once") and step == 2 and not pathlib.Path(hp["hang_once"]).exists():
        checkpoint(step)
        pathlib.Path(hp["hang_once"]).write_text(str(os.getpid()))
        time.sleep(120)
    if hp.get("crash_at") == step and RUN == 1:
        print("ERROR: crashing mid-run")
        sys.exit(1)
    if hp.get("wait_preempt") and step == int(hp["wait_preempt"]):
        sid = checkpoint(step)
        preempt = get(f"/api/v1/allocations/{alloc}/signals/preemption", timeout_seconds=int(hp.get("poll_timeout", 60)))["preempt"]
        print(f"preempt signal: {preempt}")
        if preempt:
            post(f"/api/v1/allocations/{alloc}/signals/ack_preemption")
            sys.exit(0)
post(f"/api/v1/trials/{T}/progress", {"progress": 1.0, "is_raw": True})
report("validation", steps, {"loss": loss(max(steps, 1)), "batches": steps})
checkpoint(steps)
print(f"trial {T} done")
"""


class Client:
    """A tiny authenticated client of the master's REST API."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.session = requests.Session()
        # A GET on a kept-alive connection the server closes at that moment is sent again, as
        # browsers and det's own client do; nothing else is retried.
        retry = Retry(total=2, connect=2, read=2, status=0, allowed_methods={"GET"})
        self.session.mount("http://", HTTPAdapter(max_retries=retry))
        self.token = ""

    def login(self, username: str = "admin", password: str = "") -> Client:
        r = self.session.post(
            self.url + "/api/v1/auth/login", json={"username": username, "password": password}
        )
        assert r.status_code == 200, r.text
        self.token = r.json()["token"]
        self.session.headers["Authorization"] = "Bearer " + self.token
        return self

    def request(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        kwargs.setdefault("timeout", 60)
        return self.session.request(method, self.url + path, **kwargs)

    def get(self, path: str, **kwargs: Any) -> Any:
        r = self.request("GET", path, **kwargs)
        assert r.status_code == 200, r.text
        return r.json()

    def post(self, path: str, body: Any = None, **kwargs: Any) -> Any:
        r = self.request("POST", path, json=body, **kwargs)
        assert r.status_code == 200, r.text
        return r.json()

    def stream(self, path: str, **params: Any) -> list[dict[str, Any]]:
        import json

        r = self.request("GET", path, params=params, stream=True)
        assert r.status_code == 200, r.text
        return [json.loads(line)["result"] for line in r.iter_lines() if line]

    def create(
        self, config: dict[str, Any], files: dict[str, str] | None = None, activate: bool = True
    ) -> int:
        body = {
            "config": yaml.safe_dump(config),
            "modelDefinition": context_files(files or {"trial.py": TRIAL_SCRIPT}),
            "activate": activate,
        }
        return int(self.post("/api/v1/experiments", body)["experiment"]["id"])

    def experiment(self, exp_id: int) -> dict[str, Any]:
        return self.get(f"/api/v1/experiments/{exp_id}")["experiment"]  # type: ignore[no-any-return]

    def trials(self, exp_id: int) -> list[dict[str, Any]]:
        return self.get(f"/api/v1/experiments/{exp_id}/trials")["trials"]  # type: ignore[no-any-return]

    def wait_state(self, exp_id: int, *states: str, timeout: float = WAIT_S) -> dict[str, Any]:
        return wait_for(
            lambda: (e := self.experiment(exp_id))["state"] in states and e,
            timeout,
            f"experiment {exp_id} to reach {states}",
            lambda: f"now {self.experiment(exp_id)['state']}; logs:\n{self.all_logs(exp_id)}",
        )

    def all_logs(self, exp_id: int) -> str:
        out = []
        for t in self.trials(exp_id):
            for entry in self.stream(f"/api/v1/trials/{t['id']}/logs"):
                out.append(f"[trial {t['id']}] {entry['log']}")
        return "".join(out)


def wait_for(
    predicate: Callable[[], Any], timeout: float, what: str, detail: Callable[[], str] | None = None
) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(
                f"timed out waiting for {what}" + (f": {detail()}" if detail else "")
            )
        time.sleep(0.05)


def context_files(files: dict[str, str | bytes]) -> list[dict[str, Any]]:
    """Upstream ``File`` objects for a context directory given as {path: content}."""
    out = []
    for path, content in files.items():
        data = content.encode() if isinstance(content, str) else content
        out.append(
            {
                "path": path,
                "type": ord("0"),
                "content": base64.b64encode(data).decode(),
                "mtime": str(int(time.time())),
                "mode": 0o644,
                "uid": 0,
                "gid": 0,
            }
        )
    return out


def exp_config(**overrides: Any) -> dict[str, Any]:
    """A single-trial experiment running the test trial script."""
    config: dict[str, Any] = {
        "name": "test",
        "entrypoint": "python3 trial.py",
        "searcher": {"name": "single", "metric": "loss", "smaller_is_better": True},
        "hyperparameters": {"steps": 3},
        "max_restarts": 0,
        "resources": {"slots_per_trial": 1},
    }
    config.update(overrides)
    return config


# The masters (make_master, master, sqlite_master) and databases (db_url, sqlite_url) are the root
# conftest's.


@pytest.fixture
def client(master: Any) -> Client:
    return Client(master.url).login()


@pytest.fixture
def sqlite_client(sqlite_master: Any) -> Client:
    return Client(sqlite_master.url).login()


@pytest.fixture
def config_of() -> Callable[..., dict[str, Any]]:
    """``config_of(**overrides)``: a single-trial experiment config running the test trial."""
    return exp_config


@pytest.fixture
def waiter() -> Callable[..., Any]:
    """``waiter(predicate, timeout, what)``: poll until truthy."""
    return wait_for


@pytest.fixture
def files_of() -> Callable[[dict[str, Any]], list[dict[str, Any]]]:
    """``files_of({path: content})``: upstream File objects."""
    return context_files


@pytest.fixture
def trial_script() -> str:
    return TRIAL_SCRIPT


@pytest.fixture
def client_for() -> Callable[[str], Client]:
    """``client_for(url)``: a logged-in client of the master at ``url``."""
    return lambda url: Client(url).login()
