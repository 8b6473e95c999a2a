"""Authentication, users, bad input and protojson conventions of the master's API."""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import requests
import yaml
from master.conftest import Client


def _error(r: requests.Response, status: int) -> str:
    assert r.status_code == status, r.text
    body = r.json()["error"]
    assert isinstance(body["code"], int) and body["reason"]
    return str(body["error"])


def test_login_tokens_and_401(client: Any) -> None:
    url = client.url
    assert "authentication required" in _error(requests.get(url + "/api/v1/experiments"), 401)
    bad = requests.get(url + "/api/v1/me", headers={"Authorization": "Bearer nope"})
    assert "invalid or expired token" in _error(bad, 401)
    assert requests.get(url + "/api/v1/master").json()["clusterId"]
    assert requests.get(url + "/health").status_code == 200
    info = requests.get(url + "/info").json()
    assert info["version"]
    # upstream's open-source master omits it; its e2e tests read its presence as "enterprise"
    assert "sso_providers" not in info
    wrong = requests.post(url + "/api/v1/auth/login", json={"username": "admin", "password": "x"})
    _error(wrong, 401)
    me = client.get("/api/v1/me")["user"]
    assert me["username"] == "admin" and me["admin"] is True
    # Create a user with a client-hashed password, like upstream's CLI.
    salted = hashlib.sha512(("GubPEmmotfiK9TMD6Zdw" + "s3cret").encode()).hexdigest()
    created = client.post(
        "/api/v1/users",
        {
            "user": {"username": "alice", "admin": False, "active": True},
            "password": salted,
            "isHashed": True,
        },
    )["user"]
    r = requests.post(
        url + "/api/v1/auth/login", json={"username": "alice", "password": salted, "isHashed": True}
    )
    assert r.status_code == 200, r.text
    alice = {"Authorization": "Bearer " + r.json()["token"]}
    plain = requests.post(
        url + "/api/v1/auth/login", json={"username": "alice", "password": "s3cret"}
    )
    assert plain.status_code == 200
    assert (
        requests.get(url + "/api/v1/auth/user", headers=alice).json()["user"]["username"] == "alice"
    )
    forbidden = requests.post(
        url + "/api/v1/users", json={"user": {"username": "bob"}}, headers=alice
    )
    assert "admin" in _error(forbidden, 403)
    dup = client.request("POST", "/api/v1/users", json={"user": {"username": "alice"}})
    _error(dup, 409)
    users = client.get("/api/v1/users")["users"]
    assert {"admin", "determined", "alice"} <= {u["username"] for u in users}
    patched = client.request("PATCH", f"/api/v1/users/{created['id']}", json={"displayName": "Al"})
    assert patched.json()["user"]["displayName"] == "Al"
    requests.post(url + "/api/v1/auth/logout", headers=alice)
    _error(requests.get(url + "/api/v1/me", headers=alice), 401)
    assert client.get("/api/v1/openapi.json")["paths"]["/api/v1/experiments"]


def test_bad_input_is_4xx_and_master_keeps_serving(
    client: Any, config_of: Any, files_of: Any
) -> None:
    def create(config: Any, files: Any = None) -> requests.Response:
        body = {"config": config, "modelDefinition": files or [], "activate": True}
        return client.request("POST", "/api/v1/experiments", json=body)

    assert "invalid YAML" in _error(create("name: [unclosed"), 400)
    bad_searcher = config_of(searcher={"name": "nope", "metric": "loss"})
    assert "searcher" in _error(create(yaml.safe_dump(bad_searcher)), 400)
    wrong_type = config_of(max_restarts="many")
    assert "max_restarts" in _error(create(yaml.safe_dump(wrong_type)), 400)
    no_entry = config_of()
    del no_entry["entrypoint"]
    assert "entrypoint" in _error(create(yaml.safe_dump(no_entry)), 400)
    too_big = config_of(resources={"slots_per_trial": 99})
    assert "slots_per_trial" in _error(create(yaml.safe_dump(too_big)), 400)
    good = yaml.safe_dump(config_of())
    escape = files_of({"../x": "boom"})
    assert ".." in _error(create(good, escape), 400)
    absolute = files_of({"/etc/x": "boom"})
    assert "absolute" in _error(create(good, absolute), 400)
    link = [{"path": "ln", "type": ord("2"), "content": "", "mtime": "0", "mode": 0o777}]
    assert "only regular files" in _error(create(good, link), 400)
    not_b64 = [{"path": "a.py", "type": 48, "content": "@@@", "mtime": "0", "mode": 0o644}]
    assert "base64" in _error(create(good, not_b64), 400)
    r = client.request(
        "POST",
        "/api/v1/experiments",
        data=b"{not json",
        headers={"Content-Type": "application/json"},
    )
    assert "malformed JSON" in _error(r, 400)
    _error(client.request("GET", "/api/v1/experiments/999"), 404)
    _error(client.request("GET", "/api/v1/experiments/abc"), 400)
    _error(client.request("GET", "/api/v1/experiments", params={"limit": 501}), 400)
    _error(client.request("GET", "/api/v1/no/such/thing"), 404)
    validate = client.post(
        "/api/v1/experiments", {"config": good, "validateOnly": True, "modelDefinition": []}
    )
    assert validate["experiment"]["id"] == 0 and validate["config"]["max_restarts"] == 0
    assert client.get("/api/v1/experiments")["pagination"]["total"] == 0
    assert client.get("/api/v1/master")["version"]


def test_experiment_reads_patch_archive_delete(client: Any, config_of: Any, tmp_path: Any) -> None:
    exp_id = client.create(config_of(labels=["a"], hyperparameters={"steps": 1}), activate=False)
    exp = client.get(f"/api/v1/experiments/{exp_id}")
    assert exp["experiment"]["state"] == "STATE_PAUSED"
    assert exp["config"]["labels"] == ["a"]
    assert exp["experiment"]["startTime"].endswith("Z")
    r = client.request("POST", f"/api/v1/experiments/{exp_id}/archive")
    assert "Experiment is not in terminal state." in _error(r, 400)
    patched = client.request(
        "PATCH",
        f"/api/v1/experiments/{exp_id}",
        json={
            "name": "renamed",
            "notes": "n",
            "labels": ["b", "c"],
            "resources": {"maxSlots": 2, "weight": 2, "priority": 10},
            "checkpointStorage": {"saveTrialLatest": 3},
        },
    )
    assert patched.status_code == 200, patched.text
    got = client.get(f"/api/v1/experiments/{exp_id}")
    assert got["experiment"]["name"] == "renamed" and got["experiment"]["labels"] == ["b", "c"]
    assert got["config"]["resources"]["max_slots"] == 2
    assert got["config"]["checkpoint_storage"]["save_trial_latest"] == 3
    assert client.get("/api/v1/experiments", params={"labels": "b"})["pagination"]["total"] == 1
    assert client.get("/api/v1/experiments", params={"name": "zzz"})["pagination"]["total"] == 0
    b64 = client.get(f"/api/v1/experiments/{exp_id}/model_def")["b64Tgz"]
    assert base64.b64decode(b64)[:2] == b"\x1f\x8b"
    client.post(f"/api/v1/experiments/{exp_id}/activate")
    client.wait_state(exp_id, "STATE_COMPLETED")
    client.post(f"/api/v1/experiments/{exp_id}/archive")
    listed = client.get("/api/v1/experiments", params={"archived": "false"})
    assert exp_id not in [e["id"] for e in listed["experiments"]]
    client.post(f"/api/v1/experiments/{exp_id}/unarchive")
    ckpts = client.get(f"/api/v1/experiments/{exp_id}/checkpoints")["checkpoints"]
    r = client.request("DELETE", f"/api/v1/experiments/{exp_id}")
    assert r.status_code == 200, r.text
    _error(client.request("GET", f"/api/v1/experiments/{exp_id}"), 404)
    _error(client.request("GET", f"/api/v1/experiments/{exp_id}/trials"), 404)
    _error(client.request("GET", f"/api/v1/checkpoints/{ckpts[0]['uuid']}"), 404)


def test_preview_hp_search(client: Any, config_of: Any) -> None:
    config = config_of(searcher={"name": "random", "metric": "loss", "max_trials": 4})
    out = client.post("/api/v1/preview-hp-search", {"config": yaml.safe_dump(config)})
    assert out["summary"]["trials"] == [{"count": 4, "unit": {"maxLength": True}}]


def test_initial_admin_password_and_password_change(make_master: Any, sqlite_url: str) -> None:
    master = make_master(sqlite_url, initial_admin_password="Str0ngPass")
    url = master.url
    empty = requests.post(url + "/api/v1/auth/login", json={"username": "admin", "password": ""})
    _error(empty, 401)
    for name in ("admin", "determined"):
        r = requests.post(
            url + "/api/v1/auth/login", json={"username": name, "password": "Str0ngPass"}
        )
        assert r.status_code == 200, r.text
    token = requests.post(
        url + "/api/v1/auth/login", json={"username": "determined", "password": "Str0ngPass"}
    ).json()
    headers = {"Authorization": "Bearer " + token["token"]}
    uid = token["user"]["id"]
    r = requests.post(
        url + f"/api/v1/users/{uid}/password", json={"password": "N3wPass"}, headers=headers
    )
    assert r.status_code == 200, r.text
    r = requests.post(
        url + "/api/v1/auth/login", json={"username": "determined", "password": "N3wPass"}
    )
    assert r.status_code == 200, r.text
    other = requests.post(url + "/api/v1/users/1/password", json={"password": "x"}, headers=headers)
    _error(other, 403)


def test_experiment_list_pages_and_filters_by_owner(client: Any, config_of: Any) -> None:
    """Pages are cut by the database (offset, limit, both orders) with the total of every match;
    owner filters (``users``, ``userIds``) and the in-Python ones (``name``) page alike."""
    other = Client(client.url).login("determined")
    admin_ids = [client.create(config_of(name=f"a{n}"), activate=False) for n in range(4)]
    own_ids = [other.create(config_of(name=f"d{n}"), activate=False) for n in range(2)]
    everything = sorted(admin_ids + own_ids)

    def page(**params: Any) -> tuple[list[int], int]:
        reply = client.get("/api/v1/experiments", params=params)
        return [e["id"] for e in reply["experiments"]], reply["pagination"]["total"]

    assert page(limit=2, offset=1) == (everything[1:3], 6)
    assert page(limit=2, orderBy="ORDER_BY_DESC") == (everything[::-1][:2], 6)
    assert page(offset=5) == (everything[5:], 6)
    assert page(limit=-1) == (everything, 6)
    assert page(users="determined") == (own_ids, 2)
    admin_id = client.get("/api/v1/me")["user"]["id"]
    assert page(userIds=admin_id, limit=3, offset=2) == (admin_ids[2:4], 4)
    assert page(users="nobody") == ([], 0)
    assert page(name="d", limit=1, offset=1) == (own_ids[1:], 2)
    assert page(sortBy="SORT_BY_NAME", orderBy="ORDER_BY_DESC", limit=2) == (own_ids[::-1], 6)
