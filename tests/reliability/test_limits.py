"""The guards of a shared master (issue 26): search size computed before enumeration, request body,
context and hyperparameter sizes, per-user quotas on experiments and tasks, and a master that keeps
answering while heavy requests are in flight."""

from __future__ import annotations

import base64
import threading
import time
import uuid
from typing import Any

import pytest
import requests

from determined import client
from determined.client import Client

LIMITS = {
    "max_search_trials": 1000,
    "max_request_body_bytes": 48 * 1024 * 1024,
    "max_context_bytes": 24 * 1024 * 1024,
    "max_hyperparameters_bytes": 64 * 1024,
    "max_active_experiments_per_user": 1,
    "max_active_tasks_per_user": 1,
}


def _config(**overrides: Any) -> dict[str, Any]:
    config: dict[str, Any] = {
        "name": "limits",
        "entrypoint": "python3 -c pass",
        "searcher": {"name": "single", "metric": "loss", "max_length": {"batches": 1}},
        "hyperparameters": {"lr": 0.1},
    }
    config.update(overrides)
    return config


def _huge_grid(n: int = 28, count: int = 10) -> dict[str, Any]:
    return {f"h{i}": {"type": "int", "minval": 0, "maxval": 100, "count": count} for i in range(n)}


@pytest.fixture(scope="module")
def master(make_module_master: Any) -> Any:
    return make_module_master(limits=LIMITS)


@pytest.fixture(scope="module")
def admin(master: Any) -> Client:
    return Client(master.session("admin"))


@pytest.fixture(scope="module")
def user(master: Any, admin: Client) -> tuple[str, str]:
    """A non-admin user: (name, token)."""
    name = f"limits-{uuid.uuid4().hex[:8]}"
    admin.users.create({"username": name, "active": True}, client.hash_password(""))
    return name, master.login(name)


def _post(master: Any, token: str, path: str, body: Any, **kw: Any) -> requests.Response:
    return requests.post(
        master.url + path, json=body, headers={"Authorization": f"Bearer {token}"}, timeout=60, **kw
    )


def _create(master: Any, token: str, config: dict[str, Any], **extra: Any) -> requests.Response:
    body = {"config": config, "activate": False, **extra}
    return _post(master, token, "/api/v1/experiments", body)


def test_a_huge_grid_is_refused_before_enumeration(master: Any, user: tuple[str, str]) -> None:
    """The defect: 28 hyperparameters of count 10 (10**28 points) stalled the master. Now the
    size is a product of counts: 400 naming the searcher and the limit key, at once."""
    _, token = user
    config = _config(searcher={"name": "grid", "metric": "loss", "max_length": {"batches": 1}})
    config["hyperparameters"] = _huge_grid()
    answer = _create(master, token, config)
    assert answer.status_code == 400, answer.text
    message = answer.json()["error"]["error"]
    assert "searcher:" in message and "1.000e+28" in message, message
    assert "limits.max_search_trials" in message, message
    preview = _post(master, token, "/api/v1/preview-hp-search", {"config": config})
    assert preview.status_code == 400 and "limits.max_search_trials" in preview.text
    # nested sections and categorical lengths count too: 4 * 3 * 100 = 1200 > 1000
    config["hyperparameters"] = {
        "a": {"type": "categorical", "vals": [1, 2, 3, 4]},
        "n": {
            "b": {"type": "double", "minval": 0, "maxval": 1, "count": 3},
            "c": {"type": "int", "minval": 0, "maxval": 1000, "count": 100},
        },
    }
    assert _create(master, token, config).status_code == 400
    # an int axis is clamped to the integers in range: 4 * 3 * 2 = 24 points is fine
    config["hyperparameters"]["n"]["c"] = {"type": "int", "minval": 0, "maxval": 1, "count": 100}
    preview = _post(master, token, "/api/v1/preview-hp-search", {"config": config})
    assert preview.status_code == 200, preview.text
    assert preview.json()["summary"]["trials"][0]["count"] == 24


def test_max_trials_over_the_limit_is_refused(master: Any, user: tuple[str, str]) -> None:
    _, token = user
    for searcher in (
        {"name": "random", "metric": "loss", "max_trials": 10**9, "max_length": {"batches": 1}},
        {
            "name": "adaptive_asha",
            "metric": "loss",
            "max_trials": 5000,
            "max_length": {"batches": 8},
        },
    ):
        answer = _create(master, token, _config(searcher=searcher))
        assert answer.status_code == 400, answer.text
        assert "limits.max_search_trials" in answer.json()["error"]["error"]


def test_hyperparameters_size_limit(master: Any, user: tuple[str, str]) -> None:
    _, token = user
    config = _config(hyperparameters={"blob": "x" * (70 * 1024)})
    answer = _create(master, token, config)
    assert answer.status_code == 400, answer.text
    message = answer.json()["error"]["error"]
    assert "hyperparameters:" in message and "limits.max_hyperparameters_bytes" in message


def test_request_body_limit_is_a_clear_413(master: Any, user: tuple[str, str]) -> None:
    """Declared (Content-Length) and chunked bodies over the limit: 413 naming the key."""
    _, token = user
    big = b"{" + b" " * (49 * 1024 * 1024) + b"}"
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    answer = requests.post(
        master.url + "/api/v1/experiments", data=big, headers=headers, timeout=60
    )
    assert answer.status_code == 413, answer.text[:200]
    assert "limits.max_request_body_bytes" in answer.json()["error"]["error"]

    def chunks() -> Any:
        for _ in range(50):
            yield b" " * (1024 * 1024)

    try:
        chunked = requests.post(
            master.url + "/api/v1/experiments", data=chunks(), headers=headers, timeout=60
        )
    except requests.ConnectionError:
        pass  # the master may close the connection before the client has sent everything
    else:
        assert chunked.status_code == 413, chunked.text[:200]
        assert "limits.max_request_body_bytes" in chunked.text
    assert requests.get(master.url + "/api/v1/master", timeout=30).ok


def test_context_size_limit(master: Any, user: tuple[str, str]) -> None:
    _, token = user
    content = base64.b64encode(b"\0" * (25 * 1024 * 1024)).decode()
    files = [{"path": "big.bin", "type": ord("0"), "content": content, "mode": 0o644}]
    answer = _create(master, token, _config(), modelDefinition=files)
    assert answer.status_code == 400, answer.text[:300]
    message = answer.json()["error"]["error"]
    assert "modelDefinition" in message and "limits.max_context_bytes" in message


def _wait_state(admin: Client, exp_id: int, states: tuple[str, ...]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        state = admin.experiments.get(exp_id)["experiment"]["state"]
        if state.replace("STATE_", "") in states:
            return
        time.sleep(0.1)
    raise AssertionError(f"experiment {exp_id} never reached {states}")


def test_per_user_experiment_quota(master: Any, admin: Client, user: tuple[str, str]) -> None:
    """One active (non-terminal) experiment per user: the second is a 429 naming the limit and
    how an admin raises it; once the first ends, a new one is accepted; admins are exempt."""
    _, token = user
    first = _create(master, token, _config())
    assert first.status_code == 200, first.text
    exp_id = first.json()["experiment"]["id"]
    second = _create(master, token, _config())
    assert second.status_code == 429, second.text
    message = second.json()["error"]["error"]
    assert "limits.max_active_experiments_per_user" in message and "1 per user" in message
    # validate-only requests do not count against the quota
    assert _create(master, token, _config(), validateOnly=True).status_code == 200
    for _ in range(2):
        assert _create(master, master.login("admin"), _config()).status_code == 200
    _post(master, token, f"/api/v1/experiments/{exp_id}/kill", {}).raise_for_status()
    _wait_state(admin, exp_id, ("CANCELED", "COMPLETED", "ERROR"))
    again = _create(master, token, _config())
    assert again.status_code == 200, again.text
    _post(master, token, f"/api/v1/experiments/{again.json()['experiment']['id']}/kill", {})


def test_per_user_task_quota(master: Any, user: tuple[str, str]) -> None:
    _, token = user
    body = {"config": {"entrypoint": ["sleep", "600"]}}
    first = _post(master, token, "/api/v1/commands", body)
    assert first.status_code == 200, first.text
    task_id = first.json()["command"]["id"]
    try:
        second = _post(master, token, "/api/v1/commands", body)
        assert second.status_code == 429, second.text
        assert "limits.max_active_tasks_per_user" in second.json()["error"]["error"]
    finally:
        _post(master, token, f"/api/v1/commands/{task_id}/kill", {}).raise_for_status()


def test_master_answers_while_heavy_requests_are_in_flight(
    master: Any, user: tuple[str, str]
) -> None:
    """Heavy requests (a 16 MiB context, its JSON body parsed and the tarball packed off the event
    loop) keep coming while ``GET /api/v1/master`` is asked: each answer arrives while at least
    one heavy request is in flight."""
    _, token = user
    content = base64.b64encode(bytes(range(256)) * (64 * 1024)).decode()
    files = [{"path": "data.bin", "type": ord("0"), "content": content, "mode": 0o644}]
    body = {"config": _config(), "modelDefinition": files, "validateOnly": True}
    stop = threading.Event()
    lock = threading.Lock()
    in_flight = [0]
    done = [0]
    errors: list[str] = []

    def heavy() -> None:
        while not stop.is_set():
            with lock:
                in_flight[0] += 1
            try:
                answer = _post(master, token, "/api/v1/experiments", body)
                if answer.status_code != 200:
                    errors.append(answer.text[:200])
            finally:
                with lock:
                    in_flight[0] -= 1
                    done[0] += 1

    workers = [threading.Thread(target=heavy, daemon=True) for _ in range(2)]
    for worker in workers:
        worker.start()
    try:
        overlapped = 0
        deadline = time.monotonic() + 120
        while overlapped < 5 and time.monotonic() < deadline:
            with lock:
                busy_before = in_flight[0]
                done_before = done[0]
            answer = requests.get(master.url + "/api/v1/master", timeout=60)
            assert answer.ok
            with lock:
                # a heavy request was in flight from before this GET until after its answer
                if busy_before and done[0] - done_before < busy_before:
                    overlapped += 1
        assert overlapped == 5, "GET /api/v1/master never answered during a heavy request"
    finally:
        stop.set()
        for worker in workers:
            worker.join(120)
    assert not errors, errors
    assert done[0] >= 2
