"""build(), from_string() and to_config(): types, fields and the errors that name them."""

from __future__ import annotations

import importlib.util
import os
import pathlib
import subprocess
import sys

import pytest

from determined import storage
from determined.storage import FsspecStorageManager


def _root(manager: storage.StorageManager) -> str:
    assert isinstance(manager, FsspecStorageManager)
    return manager.root


def test_shared_fs_paths(tmp_path: pathlib.Path) -> None:
    host = str(tmp_path)
    assert _root(storage.build({"type": "shared_fs", "host_path": host})) == host
    config = {"type": "shared_fs", "host_path": host, "storage_path": "a/b"}
    assert _root(storage.build(config)) == os.path.join(host, "a", "b")
    config["storage_path"] = os.path.join(host, "abs")
    assert _root(storage.build(config)) == os.path.join(host, "abs")
    # In a container, host_path is mounted elsewhere; storage_path stays relative to it.
    config["storage_path"] = "c"
    assert _root(storage.build(config, container_path="/mnt/shared")) == "/mnt/shared/c"


def test_shared_fs_legacy_keys(tmp_path: pathlib.Path) -> None:
    manager = storage.build(
        {
            "type": "shared_fs",
            "host_path": str(tmp_path),
            "checkpoint_path": "old",
            "tensorboard_path": "tb",
            "container_path": "/ignored",
            "propagation": "rprivate",
            "save_experiment_best": 0,
            "save_trial_best": 1,
            "save_trial_latest": 1,
        }
    )
    assert _root(manager) == str(tmp_path / "old")
    assert manager.store_path_is_direct_access()


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({"type": "nope"}, "checkpoint_storage.type"),
        ({}, "checkpoint_storage.type"),
        ({"type": "shared_fs"}, "checkpoint_storage.host_path"),
        ({"type": "shared_fs", "host_path": "relative"}, "checkpoint_storage.host_path"),
        (
            {"type": "shared_fs", "host_path": "/h", "storage_path": "../x"},
            "checkpoint_storage.storage_path",
        ),
        (
            {"type": "shared_fs", "host_path": "/h", "storage_path": "/elsewhere"},
            "checkpoint_storage.storage_path",
        ),
        ({"type": "shared_fs", "host_path": "/h", "bogus": 1}, "checkpoint_storage.bogus"),
        ({"type": "directory"}, "checkpoint_storage.container_path"),
        ({"type": "directory", "container_path": "rel"}, "checkpoint_storage.container_path"),
        ({"type": "s3"}, "checkpoint_storage.bucket"),
        ({"type": "s3", "bucket": ""}, "checkpoint_storage.bucket"),
        ({"type": "s3", "bucket": "b/c"}, "checkpoint_storage.bucket"),
        ({"type": "s3", "bucket": "b", "prefix": "a/../../x"}, "checkpoint_storage.prefix"),
        ({"type": "s3", "bucket": "b", "prefix": 3}, "checkpoint_storage.prefix"),
        ({"type": "s3", "bucket": "b", "access_key": 5}, "checkpoint_storage.access_key"),
        ({"type": "gcs", "bucket": "b", "prefix": ".."}, "checkpoint_storage.prefix"),
        ({"type": "gcs"}, "checkpoint_storage.bucket"),
        ({"type": "azure", "connection_string": "x"}, "checkpoint_storage.container"),
        ({"type": "azure", "container": "c"}, "checkpoint_storage.connection_string"),
        (
            {
                "type": "azure",
                "container": "c",
                "connection_string": "x",
                "account_url": "https://a.b",
            },
            "checkpoint_storage.connection_string",
        ),
        ({"type": "fsspec"}, "checkpoint_storage.url"),
        (
            {"type": "fsspec", "url": "memory://x", "storage_options": [1]},
            "checkpoint_storage.storage_options",
        ),
        ({"type": "fsspec", "url": "nosuchproto://x"}, "checkpoint_storage.url"),
    ],
)
def test_config_errors_name_the_field(config: dict, field: str) -> None:
    with pytest.raises(ValueError, match=field.replace(".", r"\.")):
        storage.build(config)


def test_build_rejects_non_mapping() -> None:
    with pytest.raises(ValueError, match="checkpoint_storage"):
        storage.build("s3://b")  # type: ignore[arg-type]


def test_s3_root_and_prefix_normalisation() -> None:
    manager = storage.build({"type": "s3", "bucket": "bkt", "prefix": "/a//b/./c/"})
    assert _root(manager) == "bkt/a/b/c"
    assert not manager.store_path_is_direct_access()


@pytest.mark.skipif(importlib.util.find_spec("gcsfs") is not None, reason="gcsfs is installed")
def test_gcs_without_gcsfs_names_the_extra() -> None:
    with pytest.raises(ImportError, match=r"pip install det-core\[gcs\]"):
        storage.build({"type": "gcs", "bucket": "b"})


@pytest.mark.skipif(importlib.util.find_spec("adlfs") is not None, reason="adlfs is installed")
def test_azure_without_adlfs_names_the_extra() -> None:
    with pytest.raises(ImportError, match=r"pip install det-core\[azure\]"):
        storage.build({"type": "azure", "container": "c", "connection_string": "x"})


def test_to_config_shortcuts(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert storage.to_config("/data/ckpt") == {"type": "shared_fs", "host_path": "/data/ckpt"}
    assert storage.to_config("rel") == {"type": "shared_fs", "host_path": str(tmp_path / "rel")}
    assert storage.to_config("file:///data/x") == {"type": "shared_fs", "host_path": "/data/x"}
    assert storage.to_config("s3://bkt/a/b/") == {"type": "s3", "bucket": "bkt", "prefix": "a/b"}
    assert storage.to_config("s3://bkt") == {"type": "s3", "bucket": "bkt"}
    assert storage.to_config("gs://bkt/p") == {"type": "gcs", "bucket": "bkt", "prefix": "p"}
    assert storage.to_config("az://container/p") == {"type": "fsspec", "url": "az://container/p"}
    assert storage.to_config("memory://m/x") == {"type": "fsspec", "url": "memory://m/x"}


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "file://host/x",
        "s3://",
        "s3://b/p?x=1",
        "gs://b/p#frag",
        "s3://b/../x",
        "nosuchproto://x",
    ],
)
def test_to_config_errors(bad: str) -> None:
    with pytest.raises(ValueError, match="checkpoint_storage"):
        storage.to_config(bad)


def test_from_string_builds_managers(tmp_path: pathlib.Path) -> None:
    manager = storage.from_string(str(tmp_path))
    assert manager.store_path_is_direct_access() and _root(manager) == str(tmp_path)
    memory = storage.from_string("memory://det-config-test/x")
    assert not memory.store_path_is_direct_access()
    assert _root(storage.from_string("s3://bkt/pre")) == "bkt/pre"


def test_direct_access_needs_a_local_filesystem() -> None:
    import fsspec

    with pytest.raises(ValueError, match="direct_access"):
        FsspecStorageManager(fsspec.filesystem("memory"), "/x", direct_access=True)


def test_import_is_light() -> None:
    code = (
        "import sys, determined.storage\n"
        "bad = [m for m in ('s3fs', 'boto3', 'botocore', 'gcsfs', 'adlfs', 'torch', 'pytest')"
        " if m in sys.modules]\n"
        "assert not bad, bad\n"
        "import determined.testing\n"
        "assert 'pytest' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
