"""Every built-in storage type passes det's checkpoint-storage conformance suite."""

from __future__ import annotations

import pathlib
import uuid

import pytest

from determined import storage
from determined.storage import FsspecStorageManager, StorageManager
from determined.testing.storage_suite import StorageSuite


class TestSharedFs(StorageSuite):
    @pytest.fixture
    def storage(self, tmp_path: pathlib.Path) -> StorageManager:
        manager = storage.build(
            {"type": "shared_fs", "host_path": str(tmp_path / "host"), "storage_path": "ckpts"}
        )
        assert manager.store_path_is_direct_access()
        return manager


class TestDirectory(StorageSuite):
    @pytest.fixture
    def storage(self, tmp_path: pathlib.Path) -> StorageManager:
        return storage.build({"type": "directory", "container_path": str(tmp_path / "dir")})


class TestS3(StorageSuite):
    @pytest.fixture
    def storage(self, s3_server, tmp_path: pathlib.Path) -> StorageManager:  # type: ignore[no-untyped-def]
        manager = storage.build(
            {
                "type": "s3",
                "bucket": s3_server.bucket,
                "prefix": f"tests/{uuid.uuid4().hex}",
                "endpoint_url": s3_server.endpoint_url,
                "access_key": "testing",
                "secret_key": "testing",
                "temp_dir": str(tmp_path / "staging"),
                "save_trial_latest": 1,
            }
        )
        assert not manager.store_path_is_direct_access()
        return manager


class TestFsspecMemory(StorageSuite):
    @pytest.fixture
    def storage(self, tmp_path: pathlib.Path) -> StorageManager:
        # The memory filesystem is process-global: a unique root per test keeps tests apart.
        manager = storage.build(
            {
                "type": "fsspec",
                "url": f"memory://det-tests/{uuid.uuid4().hex}",
                "temp_dir": str(tmp_path / "staging"),
            }
        )
        assert isinstance(manager, FsspecStorageManager)
        assert not manager.store_path_is_direct_access()
        return manager


class TestFsspecLocalUrl(StorageSuite):
    @pytest.fixture
    def storage(self, tmp_path: pathlib.Path) -> StorageManager:
        return storage.from_string(f"file://{tmp_path}/via-url")
