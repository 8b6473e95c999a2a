"""Behaviour specific to FsspecStorageManager: hostile remote keys, object-store markers, globs."""

from __future__ import annotations

import os
import pathlib
import uuid

import pytest

from determined import storage
from determined.storage import StorageManager
from determined.storage._fsspec import glob_to_regex


@pytest.mark.parametrize(
    ("glob", "matches", "misses"),
    [
        ("**/*", ["a", "a/b", "a/b/c.txt"], []),
        ("*.txt", ["a.txt"], ["d/a.txt", "a.bin"]),
        ("**/*.txt", ["a.txt", "d/e/a.txt"], ["a.bin"]),
        ("sub/?.pt", ["sub/a.pt"], ["sub/ab.pt", "a.pt"]),
        ("[ab].bin", ["a.bin", "b.bin"], ["c.bin"]),
        ("[!ab].bin", ["c.bin"], ["a.bin"]),
        ("sub/**", ["sub/x", "sub/x/y"], ["other/x"]),
    ],
)
def test_globs(glob: str, matches: list[str], misses: list[str]) -> None:
    pattern = glob_to_regex(glob)
    assert all(pattern.match(m) for m in matches)
    assert not any(pattern.match(m) for m in misses)


def test_download_refuses_hostile_remote_keys(s3_server, tmp_path: pathlib.Path) -> None:  # type: ignore[no-untyped-def]
    import boto3

    prefix = f"hostile/{uuid.uuid4().hex}"
    manager = storage.build(
        {
            "type": "s3",
            "bucket": s3_server.bucket,
            "prefix": prefix,
            "endpoint_url": s3_server.endpoint_url,
        }
    )
    client = boto3.client("s3", endpoint_url=s3_server.endpoint_url)
    client.put_object(Bucket=s3_server.bucket, Key=f"{prefix}/ckpt/ok.txt", Body=b"ok")
    client.put_object(Bucket=s3_server.bucket, Key=f"{prefix}/ckpt/../../escape.txt", Body=b"no")
    out = tmp_path / "nested" / "out"
    with pytest.raises(ValueError, match=r"'\.\.'"):
        manager.download("ckpt", out)
    assert not list(tmp_path.rglob("escape.txt"))


def test_s3_empty_directories_are_marker_objects(s3_server, tmp_path: pathlib.Path) -> None:  # type: ignore[no-untyped-def]
    import boto3

    prefix = f"markers/{uuid.uuid4().hex}"
    manager = storage.build(
        {
            "type": "s3",
            "bucket": s3_server.bucket,
            "prefix": prefix,
            "endpoint_url": s3_server.endpoint_url,
        }
    )
    (tmp_path / "src" / "empty").mkdir(parents=True)
    (tmp_path / "src" / "full").mkdir()
    (tmp_path / "src" / "full" / "f").write_bytes(b"1")
    manager.upload(tmp_path / "src", "id")
    listing = boto3.client("s3", endpoint_url=s3_server.endpoint_url).list_objects_v2(
        Bucket=s3_server.bucket, Prefix=prefix + "/"
    )
    keys = sorted(o["Key"][len(prefix) + 1 :] for o in listing["Contents"])
    assert keys == ["id/empty/", "id/full/f"]
    assert manager.list_files("id") == {"empty/": 0, "full/": 0, "full/f": 1}


def test_list_directory_refuses_symlink_cycles(tmp_path: pathlib.Path) -> None:
    (tmp_path / "d").mkdir()
    os.symlink("..", tmp_path / "d" / "loop")
    with pytest.raises(ValueError, match="cycle"):
        StorageManager.list_directory(tmp_path)


def test_symlinked_sibling_directory_is_listed_twice(tmp_path: pathlib.Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "f").write_bytes(b"ab")
    os.symlink("real", tmp_path / "alias")
    assert StorageManager.list_directory(tmp_path) == {
        "alias/": 0,
        "alias/f": 2,
        "real/": 0,
        "real/f": 2,
    }


def test_shared_fs_restore_path_is_the_stored_directory(tmp_path: pathlib.Path) -> None:
    manager = storage.build({"type": "shared_fs", "host_path": str(tmp_path)})
    with manager.store_path("ckpt") as path:
        (path / "a").write_text("1")
    assert path == tmp_path / "ckpt"
    with manager.restore_path("ckpt", selector=lambda p: False) as restored:
        assert restored == tmp_path / "ckpt"


def test_staging_leaves_nothing_behind(tmp_path: pathlib.Path) -> None:
    staging = tmp_path / "staging"
    manager = storage.build(
        {
            "type": "fsspec",
            "url": f"memory://det-staging/{uuid.uuid4().hex}",
            "temp_dir": str(staging),
        }
    )
    first, second = manager.pre_store_path("same-id"), manager.pre_store_path("same-id")
    assert first != second, "ranks staging one storage id on one machine must not collide"
    (first / "a").write_bytes(b"1")
    (second / "b").write_bytes(b"2")
    manager.post_store_path(first, "same-id")
    manager.post_store_path(second, "same-id", paths={"b"})
    assert manager.list_files("same-id") == {"a": 1, "b": 1}
    with pytest.raises(RuntimeError), manager.store_path("other") as path:
        (path / "x").write_bytes(b"x")
        raise RuntimeError
    with manager.restore_path("same-id") as restored:
        assert (restored / "a").read_bytes() == b"1"
    assert list(staging.iterdir()) == []
