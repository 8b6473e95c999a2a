"""The master's model registry routes (``/api/v1/models``) and the checkpoint protection they
bring, over raw HTTP against a real master on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest
import requests
from sdk.harness import TRIALS, trial_config

from determined.client import APIError, NotFoundError, Session, create_experiment, login
from determined.master import Master


def _session(master: Master, user: str = "admin") -> Session:
    return login(master.url, user, "")


def _finished_experiment(session: Session, **overrides: Any) -> tuple[int, list[dict[str, Any]]]:
    created = create_experiment(session, trial_config(**overrides), TRIALS)
    exp_id = created.id

    def done() -> bool:
        state = session.request("GET", f"/api/v1/experiments/{exp_id}")["experiment"]["state"]
        assert state not in ("STATE_ERROR", "STATE_CANCELED"), state
        return state == "STATE_COMPLETED"

    from sdk.harness import poll

    poll(done, f"experiment {exp_id}")
    ckpts = session.request("GET", f"/api/v1/experiments/{exp_id}/checkpoints")["checkpoints"]
    assert exp_id is not None
    return exp_id, ckpts


def test_models_and_versions_round_trip(any_db_master: Master) -> None:
    s = _session(any_db_master)
    _exp, ckpts = _finished_experiment(s)
    uuid = ckpts[0]["uuid"]

    model = s.request(
        "POST",
        "/api/v1/models",
        body={"name": "Resnet", "description": "a net", "labels": ["a", "b"], "metadata": {"k": 1}},
    )["model"]
    assert model["name"] == "Resnet" and model["numVersions"] == 0
    assert model["username"] == "admin" and model["labels"] == ["a", "b"]
    assert s.request("GET", f"/api/v1/models/{model['id']}")["model"]["name"] == "Resnet"

    with pytest.raises(APIError, match="already exists") as conflict:
        s.request("POST", "/api/v1/models", body={"name": "resnet"})
    assert conflict.value.status == 409
    for bad, why in (("", "blank"), ("a/b", "slashes"), ("123", "only numbers")):
        with pytest.raises(APIError, match=why) as err:
            s.request("POST", "/api/v1/models", body={"name": bad})
        assert err.value.status == 400

    v1 = s.request(
        "POST",
        "/api/v1/models/Resnet/versions",
        body={"checkpointUuid": uuid, "name": "first", "labels": ["prod"]},
    )["modelVersion"]
    v2 = s.request("POST", "/api/v1/models/Resnet/versions", body={"checkpointUuid": uuid})[
        "modelVersion"
    ]
    assert (v1["version"], v2["version"]) == (1, 2)
    assert v1["checkpoint"]["uuid"] == uuid and v1["model"]["name"] == "Resnet"
    assert v1["checkpoint"]["training"]["experimentConfig"]["searcher"]["metric"] == "val_loss"

    listed = s.request("GET", "/api/v1/models/Resnet/versions", params={"orderBy": "ORDER_BY_DESC"})
    assert [v["version"] for v in listed["modelVersions"]] == [2, 1]
    assert listed["model"]["numVersions"] == 2

    patched = s.request(
        "PATCH",
        "/api/v1/models/Resnet/versions/1",
        body={"comment": "best", "notes": "n", "labels": ["x"], "metadata": {"m": 2}},
    )["modelVersion"]
    assert (patched["comment"], patched["labels"], patched["metadata"]) == ("best", ["x"], {"m": 2})
    assert s.request("GET", "/api/v1/models/Resnet/versions/1")["modelVersion"]["notes"] == "n"

    s.request("DELETE", "/api/v1/models/Resnet/versions/2")
    with pytest.raises(NotFoundError, match="version 2"):
        s.request("GET", "/api/v1/models/Resnet/versions/2")

    renamed = s.request(
        "PATCH", "/api/v1/models/Resnet", body={"name": "ResNet50", "labels": ["b", "c"]}
    )["model"]
    assert renamed["name"] == "ResNet50" and renamed["labels"] == ["b", "c"]
    s.request("POST", "/api/v1/models", body={"name": "other", "labels": ["c"]})
    assert s.request("GET", "/api/v1/model/labels")["labels"] == ["c", "b"]

    found = s.request("GET", "/api/v1/models", params={"name": "net5"})["models"]
    assert [m["name"] for m in found] == ["ResNet50"]
    by_versions = s.request(
        "GET",
        "/api/v1/models",
        params={"sortBy": "SORT_BY_NUM_VERSIONS", "orderBy": "ORDER_BY_DESC"},
    )["models"]
    assert [m["name"] for m in by_versions] == ["ResNet50", "other"]
    assert [
        m["name"] for m in s.request("GET", "/api/v1/models", params={"labels": "b"})["models"]
    ] == ["ResNet50"]

    s.request("POST", "/api/v1/models/ResNet50/archive")
    assert s.request("GET", "/api/v1/models", params={"archived": "true"})["models"][0]["archived"]
    with pytest.raises(APIError, match="archived"):
        s.request("POST", "/api/v1/models/ResNet50/versions", body={"checkpointUuid": uuid})
    with pytest.raises(APIError, match="archived"):
        s.request("PATCH", "/api/v1/models/ResNet50", body={"description": "x"})
    s.request("POST", "/api/v1/models/ResNet50/unarchive")

    s.request("DELETE", "/api/v1/models/ResNet50")
    with pytest.raises(NotFoundError, match="ResNet50"):
        s.request("GET", "/api/v1/models/ResNet50")
    # The checkpoint outlives its model version.
    assert (
        s.request("GET", f"/api/v1/checkpoints/{uuid}")["checkpoint"]["state"] == "STATE_COMPLETED"
    )


def test_bad_requests_name_the_field(any_db_master: Master) -> None:
    s = _session(any_db_master)
    s.request("POST", "/api/v1/models", body={"name": "m"})
    cases = [
        ("POST", "/api/v1/models/m/versions", {}, 400, "checkpointUuid: required"),
        ("POST", "/api/v1/models/m/versions", {"checkpointUuid": "nope"}, 404, "checkpoint nope"),
        ("POST", "/api/v1/models", {"name": "n", "labels": "x"}, 400, "labels"),
        ("POST", "/api/v1/models", {"name": "n", "metadata": [1]}, 400, "metadata"),
        ("PATCH", "/api/v1/models/m", {"labels": [1]}, 400, "model.labels"),
        ("GET", "/api/v1/models/missing", None, 404, "model 'missing' not found"),
        ("GET", "/api/v1/models/m/versions/abc", None, 400, "version"),
    ]
    for method, path, body, status, message in cases:
        with pytest.raises(APIError) as err:
            s.request(method, path, body=body)
        assert err.value.status == status, (path, err.value)
        assert message in err.value.message, (path, err.value.message)
    r = requests.get(
        any_db_master.url + "/api/v1/models",
        params={"sortBy": "SORT_BY_COLOR"},
        headers=s.headers(),
        timeout=30,
    )
    assert r.status_code == 400 and "sortBy" in r.json()["error"]["error"]


def test_only_owner_or_admin_deletes(master: Master) -> None:
    admin = _session(master)
    user = _session(master, "determined")
    user.request("POST", "/api/v1/models", body={"name": "users-model"})
    admin.request("POST", "/api/v1/models", body={"name": "admins-model"})
    with pytest.raises(APIError) as err:
        user.request("DELETE", "/api/v1/models/admins-model")
    assert err.value.status == 403
    admin.request("DELETE", "/api/v1/models/users-model")


def test_registered_checkpoints_survive_gc_and_deletes(any_db_master: Master) -> None:
    """GC keeps one checkpoint by policy; one registered earlier stays too, and neither a
    checkpoint delete nor an experiment delete may remove it."""
    s = _session(any_db_master)
    created = create_experiment(
        s,
        trial_config(
            hyperparameters={"steps": 3, "losses": [0.5, 0.2, 0.9], "step_seconds": 1.0},
            checkpoint_storage={"save_trial_latest": 1, "save_trial_best": 0},
        ),
        TRIALS,
    )
    exp_id = created.id
    from sdk.harness import poll

    first = poll(
        lambda: [
            c
            for c in s.request("GET", f"/api/v1/experiments/{exp_id}/checkpoints")["checkpoints"]
            if c["metadata"]["steps_completed"] == 1
        ],
        "the first checkpoint",
    )[0]["uuid"]
    s.request("POST", "/api/v1/models", body={"name": "keep"})
    s.request("POST", "/api/v1/models/keep/versions", body={"checkpointUuid": first})
    poll(
        lambda: (
            s.request("GET", f"/api/v1/experiments/{exp_id}")["experiment"]["state"]
            == "STATE_COMPLETED"
        ),
        "the experiment",
    )

    def states() -> dict[int, str]:
        rows = s.request("GET", f"/api/v1/experiments/{exp_id}/checkpoints")["checkpoints"]
        return {c["metadata"]["steps_completed"]: c["state"] for c in rows}

    poll(lambda: states().get(2) == "STATE_DELETED", "GC of the unregistered checkpoint")
    assert states() == {1: "STATE_COMPLETED", 2: "STATE_DELETED", 3: "STATE_COMPLETED"}

    with pytest.raises(APIError, match="model registry") as err:
        s.request("DELETE", "/api/v1/checkpoints", body={"checkpointUuids": [first]})
    assert err.value.status == 400 and "'keep' version 1" in err.value.message
    with pytest.raises(APIError, match="model registry"):
        s.request(
            "POST",
            "/api/v1/checkpoints/rm",
            body={"checkpointUuids": [first], "checkpointGlobs": ["*.bin"]},
        )
    with pytest.raises(APIError, match="delete those model versions first"):
        s.request("DELETE", f"/api/v1/experiments/{exp_id}")
    assert states()[1] == "STATE_COMPLETED"

    s.request("DELETE", "/api/v1/models/keep/versions/1")
    s.request("DELETE", "/api/v1/checkpoints", body={"checkpointUuids": [first]})
    assert states()[1] == "STATE_DELETED"


def test_checkpoint_rm_and_download_through_master(master: Master, tmp_path: Any) -> None:
    import io
    import tarfile
    import zipfile

    s = _session(master)
    _exp, ckpts = _finished_experiment(s)
    uuid = ckpts[0]["uuid"]
    r = requests.get(f"{master.url}/checkpoints/{uuid}", headers=s.headers(), timeout=30)
    assert r.status_code == 200 and r.headers["content-type"] == "application/gzip"
    with tarfile.open(fileobj=io.BytesIO(r.content)) as archive:
        assert sorted(archive.getnames()) == ["metadata.json", "state.json", "weights.bin"]
    r = requests.get(
        f"{master.url}/checkpoints/{uuid}",
        headers={**s.headers(), "Accept": "application/zip"},
        timeout=30,
    )
    assert sorted(zipfile.ZipFile(io.BytesIO(r.content)).namelist()) == [
        "metadata.json",
        "state.json",
        "weights.bin",
    ]
    assert requests.get(f"{master.url}/checkpoints/{uuid}", timeout=30).status_code == 401

    s.request(
        "POST",
        "/api/v1/checkpoints/rm",
        body={"checkpointUuids": [uuid], "checkpointGlobs": ["*.bin"]},
    )
    from sdk.harness import poll

    def checkpoint() -> dict[str, Any]:
        return dict(s.request("GET", f"/api/v1/checkpoints/{uuid}")["checkpoint"])

    # a GC task removes the files after the request returns
    after = poll(lambda: (c := checkpoint())["state"] != "STATE_COMPLETED" and c, "the GC task")
    assert after["state"] == "STATE_PARTIALLY_DELETED"
    assert sorted(after["resources"]) == ["metadata.json", "state.json"]
    with pytest.raises(APIError, match="checkpointGlobs"):
        s.request(
            "POST",
            "/api/v1/checkpoints/rm",
            body={"checkpointUuids": [uuid], "checkpointGlobs": [3]},
        )
    s.request(
        "POST",
        "/api/v1/checkpoints/rm",
        body={"checkpointUuids": [uuid], "checkpointGlobs": ["**/*"]},
    )
    poll(lambda: checkpoint()["state"] == "STATE_DELETED", "the GC task deleting every file")
    r = requests.get(f"{master.url}/checkpoints/{uuid}", headers=s.headers(), timeout=30)
    assert r.status_code == 400 and "DELETED" in r.json()["error"]["error"]


def test_password_body_may_be_a_bare_string(master: Master) -> None:
    s = _session(master)
    user = s.request("POST", "/api/v1/users", body={"user": {"username": "pw-user"}})["user"]
    r = requests.post(
        f"{master.url}/api/v1/users/{user['id']}/password",
        json="Secret123",
        headers=s.headers(),
        timeout=30,
    )
    assert r.status_code == 200, r.text
    login(master.url, "pw-user", "Secret123")
    s.request("POST", f"/api/v1/users/{user['id']}/password", body={"password": "Other456x"})
    login(master.url, "pw-user", "Other456x")
    r = requests.post(
        f"{master.url}/api/v1/users/{user['id']}/password",
        json=[1],
        headers=s.headers(),
        timeout=30,
    )
    assert r.status_code == 400 and "password" in r.json()["error"]["error"]
