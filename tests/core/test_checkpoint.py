"""CheckpointContext across thread-ranks on real storage (shared_fs in tmp_path and fsspec memory://)."""

from __future__ import annotations

import json
import pathlib
import threading
import uuid
from typing import Any

import parallel
import pytest
from fake_master import OnCluster

from determined import core, storage
from determined.core import merge_metadata, merge_resources
from determined.core._local_backend import LocalBackend


def _shared_fs(tmp_path: pathlib.Path) -> dict[str, Any]:
    return {"type": "shared_fs", "host_path": str(tmp_path / "storage")}


def _memory(tmp_path: pathlib.Path) -> dict[str, Any]:
    return {
        "type": "fsspec",
        "url": f"memory://det-core-tests/{uuid.uuid4().hex}",
        "temp_dir": str(tmp_path / "staging"),
    }


STORAGES = {"shared_fs": _shared_fs, "memory": _memory}


class CountingStorage:
    """A real storage manager that also records every upload call (which files, from which rank)."""

    def __init__(self, config: dict[str, Any]) -> None:
        real = storage.build(config)
        calls: list[tuple[str, set[str] | None]] = []
        lock = threading.Lock()

        class Counting(type(real)):  # type: ignore[misc]
            def upload(self, src: Any, dst: str, paths: Any = None) -> None:
                with lock:
                    calls.append(
                        (threading.current_thread().name, None if paths is None else set(paths))
                    )
                super().upload(src, dst, paths)

        self.manager = object.__new__(Counting)
        self.manager.__dict__.update(real.__dict__)
        self.calls = calls


def checkpoint_context(
    pex: parallel.Execution, manager: storage.StorageManager
) -> core.CheckpointContext:
    return core.CheckpointContext(pex.distributed, manager, LocalBackend(manager))


def write(path: pathlib.Path, files: dict[str, str]) -> pathlib.Path:
    for name, content in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(content)
    return path


# ---- pure merging ---------------------------------------------------------------------------------
def test_merge_metadata() -> None:
    assert merge_metadata([{"a": 1, "d": {"x": 1}}, {"b": 2, "d": {"y": 2}}, {}, {"a": 1}]) == {
        "a": 1,
        "b": 2,
        "d": {"x": 1, "y": 2},
    }
    with pytest.raises(RuntimeError, match="metadata conflicts.*d.x"):
        merge_metadata([{"d": {"x": 1}}, {"d": {"x": 2}}])
    with pytest.raises(RuntimeError, match="metadata conflicts"):
        merge_metadata([{"a": {"x": 1}}, {"a": 3}])


def test_merge_resources() -> None:
    assert merge_resources([{"a": 1}, {"b/": 0, "b/c": 2}, {}]) == {"a": 1, "b/": 0, "b/c": 2}


# ---- non-sharded ----------------------------------------------------------------------------------
def test_non_sharded_from_worker_raises(tmp_path: pathlib.Path) -> None:
    manager = storage.build(_shared_fs(tmp_path))
    pex = parallel.Execution(2)

    def fn() -> None:
        ckpt = checkpoint_context(pex, manager)
        src = write(tmp_path / f"src{pex.rank}", {"a": "1"})
        with pex.raises_when(pex.rank != 0, RuntimeError, match="chief"):
            ckpt.upload(src)
        with pex.raises_when(pex.rank != 0, RuntimeError, match="chief"):  # noqa: SIM117
            with ckpt.store_path() as (path, _):
                (path / "x").write_text("x")

    pex.run(fn)


def test_upload_selector_and_caller_dir_untouched(tmp_path: pathlib.Path) -> None:
    manager = storage.build(_shared_fs(tmp_path))
    ckpt = core.CheckpointContext(core.DistributedContext(), manager, LocalBackend(manager))
    src = write(tmp_path / "src", {"keep.txt": "k", "drop.txt": "d", "sub/keep2.txt": "k2"})
    before = sorted(p.relative_to(src).as_posix() for p in src.rglob("*"))
    storage_id = ckpt.upload(
        src, {"steps_completed": 1}, selector=lambda p: "keep" in p or p.endswith("/")
    )
    assert sorted(p.relative_to(src).as_posix() for p in src.rglob("*")) == before
    assert set(manager.list_files(storage_id)) >= {"keep.txt", "sub/keep2.txt", "metadata.json"}
    assert "drop.txt" not in manager.list_files(storage_id)
    with pytest.raises(RuntimeError, match="shard=True"):
        ckpt.upload(None)


# ---- sharded upload -------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", list(STORAGES))
def test_sharded_upload_per_rank_dirs(tmp_path: pathlib.Path, kind: str) -> None:
    manager = storage.build(STORAGES[kind](tmp_path))
    pex = parallel.Execution(4, local_size=2)

    def fn() -> str:
        ckpt = checkpoint_context(pex, manager)
        src = write(
            tmp_path / f"rank{pex.rank}",
            {f"model_{pex.rank}.bin": str(pex.rank), "common.txt": "same"},
        )
        ckpt_dir = None if pex.rank == 3 else src  # a rank with nothing to save
        meta = {"steps_completed": 5, "ranks": {str(pex.rank): pex.rank}}
        return ckpt.upload(ckpt_dir, meta, shard=True)

    ids = pex.run(fn)
    assert len(set(ids)) == 1
    files = manager.list_files(ids[0])
    assert {"model_0.bin", "model_1.bin", "model_2.bin", "common.txt", "metadata.json"} <= set(
        files
    )
    assert "model_3.bin" not in files
    with manager.restore_path(ids[0]) as path:
        assert json.loads((path / "metadata.json").read_text()) == {
            "steps_completed": 5,
            "ranks": {"0": 0, "1": 1, "2": 2, "3": 3},
        }
    for rank in range(3):
        assert not (tmp_path / f"rank{rank}" / "metadata.json").exists()


def test_sharded_upload_shared_dir_uploaded_once(tmp_path: pathlib.Path) -> None:
    counting = CountingStorage(_shared_fs(tmp_path))
    shared = write(tmp_path / "shared", {"a.bin": "a", "d/b.bin": "b"})
    pex = parallel.Execution(3)

    def fn() -> str:
        return checkpoint_context(pex, counting.manager).upload(shared, shard=True)

    ids = pex.run(fn)
    data_uploads = [c for c in counting.calls if c[1] != {"metadata.json"}]
    assert len(data_uploads) == 1, counting.calls
    assert {"a.bin", "d/b.bin", "metadata.json"} <= set(counting.manager.list_files(ids[0]))


def test_sharded_upload_conflicting_files_fail_every_rank(tmp_path: pathlib.Path) -> None:
    manager = storage.build(_shared_fs(tmp_path))
    pex = parallel.Execution(3)

    def fn() -> None:
        src = write(
            tmp_path / f"r{pex.rank}", {"weights.bin": "rank0" if pex.rank == 0 else "other"}
        )
        with pytest.raises(RuntimeError, match="files conflicts"):
            checkpoint_context(pex, manager).upload(src, shard=True)

    pex.run(fn)


def test_sharded_upload_file_vs_dir_conflict(tmp_path: pathlib.Path) -> None:
    manager = storage.build(_shared_fs(tmp_path))
    pex = parallel.Execution(2)

    def fn() -> None:
        files = {"x": "file"} if pex.rank == 0 else {"x/inner": "dir"}
        src = write(tmp_path / f"r{pex.rank}", files)
        with pytest.raises(RuntimeError, match="files conflicts"):
            checkpoint_context(pex, manager).upload(src, shard=True)

    pex.run(fn)


def test_sharded_upload_identical_files_ok(tmp_path: pathlib.Path) -> None:
    counting = CountingStorage(_shared_fs(tmp_path))
    pex = parallel.Execution(3)

    def fn() -> str:
        src = write(tmp_path / f"r{pex.rank}", {"vocab.txt": "identical", f"own{pex.rank}": "x"})
        return checkpoint_context(pex, counting.manager).upload(src, shard=True)

    ids = pex.run(fn)
    uploaded = [p for _, paths in counting.calls for p in (paths or set()) if p == "vocab.txt"]
    assert uploaded == ["vocab.txt"]
    assert {"vocab.txt", "own0", "own1", "own2"} <= set(counting.manager.list_files(ids[0]))


def test_sharded_upload_metadata_conflict_fails_every_rank(tmp_path: pathlib.Path) -> None:
    manager = storage.build(_shared_fs(tmp_path))
    pex = parallel.Execution(2)

    def fn() -> None:
        src = write(tmp_path / f"r{pex.rank}", {f"f{pex.rank}": "x"})
        with pytest.raises(RuntimeError, match="metadata conflicts"):
            checkpoint_context(pex, manager).upload(src, {"steps_completed": pex.rank}, shard=True)

    pex.run(fn)
    assert not any((tmp_path / "storage").glob("*/f0")), "files were uploaded despite the conflict"


# ---- sharded store_path ---------------------------------------------------------------------------
@pytest.mark.parametrize("kind", list(STORAGES))
def test_sharded_store_path(tmp_path: pathlib.Path, kind: str) -> None:
    manager = storage.build(STORAGES[kind](tmp_path))
    assert manager.store_path_is_direct_access() == (kind == "shared_fs")
    pex = parallel.Execution(3)

    def fn() -> str:
        ckpt = checkpoint_context(pex, manager)
        with ckpt.store_path({"steps_completed": 2, f"r{pex.rank}": True}, shard=True) as (
            path,
            storage_id,
        ):
            (path / f"shard{pex.rank}.bin").write_text(str(pex.rank))
        return storage_id

    ids = pex.run(fn)
    assert len(set(ids)) == 1
    files = manager.list_files(ids[0])
    assert {"shard0.bin", "shard1.bin", "shard2.bin", "metadata.json"} <= set(files)
    with manager.restore_path(ids[0]) as path:
        assert json.loads((path / "metadata.json").read_text()) == {
            "steps_completed": 2,
            "r0": True,
            "r1": True,
            "r2": True,
        }


@pytest.mark.parametrize("kind", list(STORAGES))
def test_sharded_store_path_failure_on_one_rank_fails_all(
    tmp_path: pathlib.Path, kind: str
) -> None:
    manager = storage.build(STORAGES[kind](tmp_path))
    pex = parallel.Execution(3, timeout=20)

    def fn() -> None:
        ckpt = checkpoint_context(pex, manager)
        with pytest.raises((RuntimeError, ZeroDivisionError)):  # noqa: SIM117
            with ckpt.store_path(shard=True) as (path, _):
                (path / f"s{pex.rank}").write_text("x")
                if pex.rank == 1:
                    raise ZeroDivisionError("rank 1 broke")

    pex.run(fn)


# ---- download / restore ---------------------------------------------------------------------------
def _saved(tmp_path: pathlib.Path, kind: str) -> tuple[storage.StorageManager, str]:
    manager = storage.build(STORAGES[kind](tmp_path))
    ckpt = core.CheckpointContext(core.DistributedContext(), manager, LocalBackend(manager))
    src = write(tmp_path / "saved", {"a.txt": "A", "b.txt": "B", "c.txt": "C", "sub/d.txt": "D"})
    return manager, ckpt.upload(src, {"steps_completed": 3})


SELECTORS = {
    0: lambda p: p == "a.txt",
    1: lambda p: p == "b.txt",
    2: lambda p: p.startswith("sub/"),
    3: None,
}


@pytest.mark.parametrize("kind", list(STORAGES))
def test_download_shared_votes_across_local_ranks(tmp_path: pathlib.Path, kind: str) -> None:
    manager, storage_id = _saved(tmp_path, kind)
    pex = parallel.Execution(4, local_size=2)

    def fn() -> None:
        node_dir = tmp_path / f"node{pex.cross_rank}"
        checkpoint_context(pex, manager).download(
            storage_id, node_dir, selector=SELECTORS[pex.rank]
        )

    pex.run(fn)
    node0 = {
        p.relative_to(tmp_path / "node0").as_posix()
        for p in (tmp_path / "node0").rglob("*")
        if p.is_file()
    }
    assert node0 == {"a.txt", "b.txt"}  # union of ranks 0 and 1
    node1 = {
        p.relative_to(tmp_path / "node1").as_posix()
        for p in (tmp_path / "node1").rglob("*")
        if p.is_file()
    }
    assert {
        "a.txt",
        "b.txt",
        "c.txt",
        "sub/d.txt",
        "metadata.json",
    } <= node1  # rank 3 wants everything


@pytest.mark.parametrize("kind", list(STORAGES))
def test_download_no_shared(tmp_path: pathlib.Path, kind: str) -> None:
    manager, storage_id = _saved(tmp_path, kind)
    pex = parallel.Execution(2)

    def fn() -> None:
        target = tmp_path / f"rank{pex.rank}"
        checkpoint_context(pex, manager).download(
            storage_id, target, core.DownloadMode.NoSharedDownload, selector=SELECTORS[pex.rank]
        )

    pex.run(fn)
    assert [p.name for p in (tmp_path / "rank0").rglob("*") if p.is_file()] == ["a.txt"]
    assert [p.name for p in (tmp_path / "rank1").rglob("*") if p.is_file()] == ["b.txt"]


@pytest.mark.parametrize("kind", list(STORAGES))
@pytest.mark.parametrize("mode", list(core.DownloadMode))
def test_restore_path(tmp_path: pathlib.Path, kind: str, mode: core.DownloadMode) -> None:
    manager, storage_id = _saved(tmp_path, kind)
    pex = parallel.Execution(2)

    def fn() -> str:
        with checkpoint_context(pex, manager).restore_path(
            storage_id, mode, selector=SELECTORS[pex.rank]
        ) as path:
            mine = "a.txt" if pex.rank == 0 else "b.txt"
            assert (path / mine).read_text() == mine[0].upper()
            pex.distributed.allgather(None)  # both ranks inside the block at once
            return str(path)

    paths = pex.run(fn)
    if mode == core.DownloadMode.LocalWorkersShareDownload:
        assert paths[0] == paths[1]
    if kind == "memory":
        assert not any(pathlib.Path(p).exists() for p in paths), "downloaded copy not cleaned up"


def test_restore_missing_checkpoint(tmp_path: pathlib.Path) -> None:
    manager = storage.build(_shared_fs(tmp_path))
    pex = parallel.Execution(2)

    def fn() -> None:
        with pytest.raises((FileNotFoundError, RuntimeError)):  # noqa: SIM117
            with checkpoint_context(pex, manager).restore_path(
                "0" * 8 + "-0000-0000-0000-" + "0" * 12
            ):
                pass

    pex.run(fn)


# ---- delete / metadata ----------------------------------------------------------------------------
def test_delete_and_get_metadata_off_cluster(
    off_cluster: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    src = write(tmp_path / "src", {"a": "1"})
    with core.init(checkpoint_storage=str(tmp_path / "ckpts")) as ctx:
        storage_id = ctx.checkpoint.upload(src, {"steps_completed": 9, "x": [1]})
        assert ctx.checkpoint.get_metadata(storage_id) == {"steps_completed": 9, "x": [1]}
        ctx.checkpoint.delete(storage_id)
    assert not (tmp_path / "ckpts" / storage_id / "a").exists()
    # a fresh context (new backend) reads the metadata back from storage
    src2 = write(tmp_path / "src2", {"b": "2"})
    with core.init(checkpoint_storage=str(tmp_path / "ckpts")) as ctx:
        other = ctx.checkpoint.upload(src2, {"steps_completed": 1})
    with core.init(checkpoint_storage=str(tmp_path / "ckpts")) as ctx:
        assert ctx.checkpoint.get_metadata(other) == {"steps_completed": 1}


def test_on_cluster_sharded_report(on_cluster: OnCluster, tmp_path: pathlib.Path) -> None:
    fm = on_cluster.master
    pex = parallel.Execution(2)

    def fn() -> str:
        src = write(tmp_path / f"r{pex.rank}", {f"w{pex.rank}.bin": "ab"})
        with core.init(distributed=pex.distributed) as ctx:
            return ctx.checkpoint.upload(src, {"steps_completed": 4}, shard=True)

    ids = pex.run(fn)
    (report,) = fm.find("POST", "/api/v1/checkpoints")
    assert report.body["uuid"] == ids[0]
    assert set(report.body["resources"]) == {"w0.bin", "w1.bin", "metadata.json"}
    assert report.body["resources"]["w1.bin"] == "2"


def test_on_cluster_sharded_store_path_memory(
    on_cluster: OnCluster, tmp_path: pathlib.Path
) -> None:
    fm = on_cluster.master
    config = _memory(tmp_path)
    pex = parallel.Execution(2)

    def fn() -> str:
        with core.init(distributed=pex.distributed, checkpoint_storage=config) as ctx:
            with ctx.checkpoint.store_path({"steps_completed": 1}, shard=True) as (
                path,
                storage_id,
            ):
                (path / f"p{pex.rank}").write_text("x")
            return storage_id

    ids = pex.run(fn)
    (report,) = fm.find("POST", "/api/v1/checkpoints")
    assert set(report.body["resources"]) == {"p0", "p1", "metadata.json"}
    assert "metadata.json" in storage.build(config).list_files(ids[0])
