"""The conformance suite for checkpoint storage managers.

Subclass it in a test module with a name pytest collects, and provide a ``storage`` fixture that
returns a fresh, empty ``StorageManager`` for each test::

    from determined.testing.storage_suite import StorageSuite

    class TestMyStorage(StorageSuite):
        @pytest.fixture
        def storage(self, tmp_path):
            return my_plugin.build({"type": "mine", "root": str(tmp_path / "store")})
"""

from __future__ import annotations

import os
import pathlib
import uuid

import pytest

from determined.storage import CheckpointNotFound, StorageManager

TREE = {
    "model.bin": bytes(range(256)) * 4,
    "notes.txt": b"hello\n",
    "sub/weights.pt": b"\x00\x01\x02" * 100,
    "sub/deeper/state.json": b'{"step": 3}',
    "sub/deeper/more.txt": b"more",
}
EMPTY_DIRS = ("empty", "sub/also_empty")


def make_tree(root: pathlib.Path, files: dict[str, bytes] = TREE) -> pathlib.Path:
    """Write ``files`` (plus the empty directories) below ``root`` and return it."""
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    for rel in EMPTY_DIRS:
        (root / rel).mkdir(parents=True, exist_ok=True)
    return root


def read_tree(root: pathlib.Path) -> dict[str, bytes]:
    """Every file below ``root`` as relative path -> content."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def new_id() -> str:
    return str(uuid.uuid4())


class StorageSuite:
    """Tests every StorageManager must pass; the subclass provides the ``storage`` fixture."""

    @pytest.fixture
    def storage(self) -> StorageManager:
        raise NotImplementedError("subclasses of StorageSuite must provide a `storage` fixture")

    @pytest.fixture
    def tree(self, tmp_path: pathlib.Path) -> pathlib.Path:
        return make_tree(tmp_path / "src")

    # ------------------------------------------------------------------------------ round trips

    def test_is_a_storage_manager(self, storage: StorageManager) -> None:
        assert isinstance(storage, StorageManager)

    def test_round_trip_nested_tree_with_empty_dirs(
        self, storage: StorageManager, tree: pathlib.Path, tmp_path: pathlib.Path
    ) -> None:
        sid = new_id()
        storage.upload(tree, sid)
        expected = StorageManager.list_directory(tree)
        assert "empty/" in expected and "sub/also_empty/" in expected
        assert storage.list_files(sid) == expected
        out = tmp_path / "out"
        storage.download(sid, out)
        assert read_tree(out) == TREE
        assert StorageManager.list_directory(out) == expected

    def test_upload_paths_subset(
        self, storage: StorageManager, tree: pathlib.Path, tmp_path: pathlib.Path
    ) -> None:
        sid = new_id()
        storage.upload(tree, sid, paths={"notes.txt", "sub/", "sub/deeper/", "sub/deeper/more.txt"})
        files = {k: v for k, v in storage.list_files(sid).items() if not k.endswith("/")}
        assert files == {"notes.txt": 6, "sub/deeper/more.txt": 4}
        storage.download(sid, tmp_path / "out")
        assert read_tree(tmp_path / "out") == {
            "notes.txt": TREE["notes.txt"],
            "sub/deeper/more.txt": TREE["sub/deeper/more.txt"],
        }

    def test_upload_unknown_path_is_refused(
        self, storage: StorageManager, tree: pathlib.Path
    ) -> None:
        with pytest.raises(FileNotFoundError, match="nope"):
            storage.upload(tree, new_id(), paths={"nope.txt"})

    def test_download_with_selector(
        self, storage: StorageManager, tree: pathlib.Path, tmp_path: pathlib.Path
    ) -> None:
        sid = new_id()
        storage.upload(tree, sid)
        seen: list[str] = []

        def selector(path: str) -> bool:
            seen.append(path)
            return path.endswith(".json") or path == "empty/"

        out = tmp_path / "out"
        storage.download(sid, out, selector=selector)
        assert read_tree(out) == {"sub/deeper/state.json": TREE["sub/deeper/state.json"]}
        assert (out / "empty").is_dir()
        assert not (out / "sub" / "also_empty").exists()
        assert "sub/" in seen and "sub/deeper/" in seen and "model.bin" in seen
        assert all(not p.startswith("/") for p in seen)

    def test_restore_path(
        self, storage: StorageManager, tree: pathlib.Path, tmp_path: pathlib.Path
    ) -> None:
        sid = new_id()
        storage.upload(tree, sid)
        with storage.restore_path(sid) as path:
            assert read_tree(path) == TREE
            assert (path / "empty").is_dir()
        if not storage.store_path_is_direct_access():
            assert not path.exists(), "a downloaded restore_path must be removed on exit"

    def test_restore_path_with_selector(self, storage: StorageManager, tree: pathlib.Path) -> None:
        sid = new_id()
        storage.upload(tree, sid)
        with storage.restore_path(sid, selector=lambda p: p == "notes.txt") as path:
            files = read_tree(path)
            assert files["notes.txt"] == TREE["notes.txt"]
            if not storage.store_path_is_direct_access():
                assert files == {"notes.txt": TREE["notes.txt"]}

    # ------------------------------------------------------------------------------ store_path

    def test_store_path(self, storage: StorageManager, tmp_path: pathlib.Path) -> None:
        sid = new_id()
        with storage.store_path(sid) as path:
            make_tree(path)
        assert storage.list_files(sid) == StorageManager.list_directory(make_tree(tmp_path / "x"))
        with storage.restore_path(sid) as restored:
            assert read_tree(restored) == TREE
        if storage.store_path_is_direct_access():
            assert path.is_dir()
        else:
            assert not path.exists(), "the staging directory must be removed after upload"

    def test_pre_and_post_store_path_upload_files_written_last(
        self, storage: StorageManager
    ) -> None:
        sid = new_id()
        path = storage.pre_store_path(sid)
        make_tree(path)
        paths = set(StorageManager.list_directory(path))
        (path / "metadata.json").write_text('{"steps_completed": 1}')
        storage.post_store_path(path, sid, paths)
        assert storage.list_files(sid)["metadata.json"] == len('{"steps_completed": 1}')

    def test_post_store_path_without_paths_uploads_everything(
        self, storage: StorageManager
    ) -> None:
        sid = new_id()
        path = storage.pre_store_path(sid)
        make_tree(path)
        (path / "metadata.json").write_text("{}")
        expected = StorageManager.list_directory(path)
        storage.post_store_path(path, sid)
        assert storage.list_files(sid) == expected

    def test_store_path_failure_uploads_nothing(self, storage: StorageManager) -> None:
        sid = new_id()
        with pytest.raises(RuntimeError, match="boom"), storage.store_path(sid) as path:
            (path / "partial.bin").write_bytes(b"x")
            raise RuntimeError("boom")
        if not storage.store_path_is_direct_access():
            assert not path.exists()
            with pytest.raises(CheckpointNotFound):
                storage.list_files(sid)

    # ----------------------------------------------------------------------------------- delete

    def test_delete_everything(self, storage: StorageManager, tree: pathlib.Path) -> None:
        sid, other = new_id(), new_id()
        storage.upload(tree, sid)
        storage.upload(tree, other)
        assert storage.delete(sid, ["**/*"]) == {}
        with pytest.raises(CheckpointNotFound):
            storage.list_files(sid)
        assert storage.list_files(other) == StorageManager.list_directory(tree)

    def test_delete_missing_checkpoint_is_a_no_op(self, storage: StorageManager) -> None:
        assert storage.delete(new_id(), ["**/*"]) == {}
        assert storage.delete(new_id(), ["*.txt"]) == {}

    def test_delete_globs_returns_remaining(
        self, storage: StorageManager, tree: pathlib.Path
    ) -> None:
        sid = new_id()
        storage.upload(tree, sid)
        remaining = storage.delete(sid, ["*.txt", "sub/deeper/*.json"])
        assert remaining == storage.list_files(sid)
        files = {k for k in remaining if not k.endswith("/")}
        assert files == {"model.bin", "sub/weights.pt", "sub/deeper/more.txt"}

    def test_delete_recursive_glob_and_directory(
        self, storage: StorageManager, tree: pathlib.Path
    ) -> None:
        sid = new_id()
        storage.upload(tree, sid)
        remaining = storage.delete(sid, ["**/*.txt", "sub/deeper"])
        files = {k for k in remaining if not k.endswith("/")}
        assert files == {"model.bin", "sub/weights.pt"}
        assert not any(k.startswith("sub/deeper") for k in remaining)

    def test_delete_all_files_by_glob_leaves_nothing(
        self, storage: StorageManager, tree: pathlib.Path
    ) -> None:
        sid = new_id()
        storage.upload(tree, sid)
        assert storage.delete(sid, ["*", "sub"]) == {}

    # ----------------------------------------------------------------------------- not found

    def test_missing_checkpoint(self, storage: StorageManager, tmp_path: pathlib.Path) -> None:
        sid = new_id()
        with pytest.raises(CheckpointNotFound, match=sid):
            storage.list_files(sid)
        with pytest.raises(CheckpointNotFound, match=sid):
            storage.download(sid, tmp_path / "out")
        with pytest.raises(CheckpointNotFound, match=sid), storage.restore_path(sid):
            pass
        assert issubclass(CheckpointNotFound, FileNotFoundError)

    # ------------------------------------------------------------------------------- safety

    @pytest.mark.parametrize("bad", ["", "/", "../escape", "a/../../b", "/abs/id", "a//b", "."])
    def test_bad_storage_ids_are_refused(
        self, storage: StorageManager, tree: pathlib.Path, tmp_path: pathlib.Path, bad: str
    ) -> None:
        with pytest.raises(ValueError, match="storage_id"):
            storage.upload(tree, bad)
        with pytest.raises(ValueError, match="storage_id"):
            storage.download(bad, tmp_path / "out")
        with pytest.raises(ValueError, match="storage_id"):
            storage.delete(bad, ["**/*"])
        with pytest.raises(ValueError, match="storage_id"):
            storage.pre_store_path(bad)
        with pytest.raises(ValueError, match="storage_id"), storage.restore_path(bad):
            pass

    @pytest.mark.parametrize("bad", ["../notes.txt", "/etc/passwd", "sub/../../x"])
    def test_bad_upload_paths_are_refused(
        self, storage: StorageManager, tree: pathlib.Path, bad: str
    ) -> None:
        with pytest.raises(ValueError, match="paths"):
            storage.upload(tree, new_id(), paths={bad})

    @pytest.mark.parametrize("bad", ["../*", "/abs/*", "sub/../../*"])
    def test_bad_delete_globs_are_refused(
        self, storage: StorageManager, tree: pathlib.Path, bad: str
    ) -> None:
        sid = new_id()
        storage.upload(tree, sid)
        with pytest.raises(ValueError, match="globs"):
            storage.delete(sid, [bad])
        assert storage.list_files(sid) == StorageManager.list_directory(tree)

    def test_symlink_out_of_upload_dir_is_refused(
        self, storage: StorageManager, tree: pathlib.Path, tmp_path: pathlib.Path
    ) -> None:
        secret = tmp_path / "secret.txt"
        secret.write_text("do not upload")
        os.symlink(secret, tree / "sub" / "leak.txt")
        sid = new_id()
        with pytest.raises(ValueError, match="outside"):
            storage.upload(tree, sid)
        if not storage.store_path_is_direct_access():
            with pytest.raises(ValueError, match="outside"), storage.store_path(sid) as path:
                os.symlink(tmp_path, path / "leak_dir")
            assert not path.exists()

    def test_symlink_inside_upload_dir_is_uploaded_as_a_file(
        self, storage: StorageManager, tree: pathlib.Path, tmp_path: pathlib.Path
    ) -> None:
        os.symlink("notes.txt", tree / "alias.txt")
        sid = new_id()
        storage.upload(tree, sid)
        storage.download(sid, tmp_path / "out")
        assert (tmp_path / "out" / "alias.txt").read_bytes() == TREE["notes.txt"]

    def test_download_never_writes_outside_destination(
        self, storage: StorageManager, tree: pathlib.Path, tmp_path: pathlib.Path
    ) -> None:
        sid = new_id()
        storage.upload(tree, sid)
        outside = tmp_path / "outside"
        outside.mkdir()
        out = tmp_path / "out"
        out.mkdir()
        os.symlink(outside, out / "sub")
        with pytest.raises(ValueError, match="outside"):
            storage.download(sid, out)
        assert list(outside.iterdir()) == []

    # ------------------------------------------------------------------------------- content

    def test_overwrite(self, storage: StorageManager, tmp_path: pathlib.Path) -> None:
        sid = new_id()
        storage.upload(make_tree(tmp_path / "v1", {"w.bin": b"old" * 10}), sid)
        storage.upload(make_tree(tmp_path / "v2", {"w.bin": b"new"}), sid)
        assert storage.list_files(sid)["w.bin"] == 3
        storage.download(sid, tmp_path / "out")
        assert (tmp_path / "out" / "w.bin").read_bytes() == b"new"

    def test_binary_and_large_content(
        self, storage: StorageManager, tmp_path: pathlib.Path
    ) -> None:
        files = {
            "all_bytes.bin": bytes(range(256)) * 16,
            "big.bin": os.urandom(3 * 1024 * 1024 + 7),
        }
        sid = new_id()
        storage.upload(make_tree(tmp_path / "src", files), sid)
        assert storage.list_files(sid)["big.bin"] == len(files["big.bin"])
        storage.download(sid, tmp_path / "out")
        assert read_tree(tmp_path / "out") == files

    def test_list_directory_alias(self, tree: pathlib.Path) -> None:
        listing = StorageManager.list_directory(tree)
        assert StorageManager._list_directory(tree) == listing
        assert listing["sub/"] == 0 and listing["notes.txt"] == 6
