"""Checkpoint storage on a shared master is restricted to the roots the admin allows (issue 26):
any user could point ``checkpoint_storage.host_path`` anywhere and have the master's processes
write there."""

from __future__ import annotations

import os
import pathlib
import tempfile
import uuid
from typing import Any

import pytest
import requests

from determined import client
from determined.client import Client


def _config(storage: dict[str, Any] | None) -> dict[str, Any]:
    config: dict[str, Any] = {
        "entrypoint": "python3 -c pass",
        "searcher": {"name": "single", "metric": "loss", "max_length": {"batches": 1}},
    }
    if storage is not None:
        config["checkpoint_storage"] = storage
    return config


def _validate(master: Any, token: str, storage: dict[str, Any] | None) -> requests.Response:
    return requests.post(
        master.url + "/api/v1/experiments",
        json={"config": _config(storage), "validateOnly": True},
        headers={"Authorization": f"Bearer {token}"},
        timeout=60,
    )


def _outside() -> str:
    """A directory outside the data dir and the temporary directory."""
    home = pathlib.Path.home()
    if not str(home.resolve()).startswith(str(pathlib.Path(tempfile.gettempdir()).resolve())):
        return str(home / "det-outside-root")
    return "/var/det-outside-root"


@pytest.fixture(scope="module")
def master(make_module_master: Any) -> Any:
    return make_module_master()


@pytest.fixture(scope="module")
def token(master: Any) -> str:
    admin = Client(master.session("admin"))
    name = f"roots-{uuid.uuid4().hex[:8]}"
    admin.users.create({"username": name, "active": True}, client.hash_password(""))
    return str(master.login(name))


@pytest.mark.parametrize(
    "storage, field",
    [
        ({"type": "shared_fs", "host_path": "OUTSIDE"}, "checkpoint_storage.host_path"),
        ({"type": "directory", "container_path": "OUTSIDE"}, "checkpoint_storage.container_path"),
        ({"type": "fsspec", "url": "file://OUTSIDE"}, "checkpoint_storage.url"),
        (
            {"type": "shared_fs", "host_path": "DATA", "storage_path": "/etc/det"},
            "checkpoint_storage.storage_path",
        ),
    ],
)
def test_paths_outside_the_roots_are_refused_naming_the_field(
    master: Any, token: str, storage: dict[str, Any], field: str
) -> None:
    storage = {
        k: v.replace("OUTSIDE", _outside()).replace("DATA", str(master.data_dir))
        for k, v in storage.items()
    }
    answer = _validate(master, token, storage)
    assert answer.status_code == 400, answer.text
    message = answer.json()["error"]["error"]
    assert field in message, message
    if not field.endswith("storage_path"):  # config validation already keeps it in host_path
        assert "checkpoint_storage_roots" in message, message
    # the admin is bound by the same roots (they change them in the master config)
    answer = _validate(master, master.login("admin"), storage)
    assert answer.status_code == 400, answer.text


def test_paths_inside_the_default_roots_are_accepted(
    master: Any, token: str, tmp_path: pathlib.Path
) -> None:
    for storage in (
        None,  # the master's own default
        {"type": "shared_fs", "host_path": str(tmp_path / "ckpt")},
        {"type": "shared_fs", "host_path": str(master.data_dir / "mine")},
        {"type": "directory", "container_path": str(tmp_path / "dir")},
        {"type": "s3", "bucket": "some-bucket"},
    ):
        answer = _validate(master, token, storage)
        assert answer.status_code == 200, (storage, answer.text)


def test_workspace_checkpoint_storage_outside_the_roots_is_refused(master: Any) -> None:
    admin = Client(master.session("admin"))
    with pytest.raises(client.APIError) as info:
        admin.workspaces.create(
            f"ws-{uuid.uuid4().hex[:8]}",
            checkpoint_storage_config={"type": "shared_fs", "host_path": _outside()},
        )
    assert info.value.status == 400
    assert "checkpointStorageConfig.host_path" in str(info.value)


def test_configured_roots_replace_the_defaults(make_master: Any, tmp_path: pathlib.Path) -> None:
    """``checkpoint_storage_roots`` in the master config: only those (and the master's own default
    storage); a symlink inside a root that leads outside it is refused too."""
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    (allowed / "escape").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    handle = make_master(checkpoint_storage_roots=[str(allowed)])
    token = handle.login("admin")
    ok = _validate(handle, token, {"type": "shared_fs", "host_path": str(allowed / "a")})
    assert ok.status_code == 200, ok.text
    assert _validate(handle, token, None).status_code == 200
    for path in (tmp_path / "other", allowed / "escape" / "x", pathlib.Path(os.sep, "tmp", "x")):
        answer = _validate(handle, token, {"type": "shared_fs", "host_path": str(path)})
        assert answer.status_code == 400, (path, answer.text)
        assert "checkpoint_storage.host_path" in answer.json()["error"]["error"]
