"""Packaging a model-definition directory: .detignore rules, links, size limit, includes."""

from __future__ import annotations

import base64
import os
import pathlib

import pytest

from determined.client import read_context_dir


def tree(root: pathlib.Path, files: dict[str, str]) -> pathlib.Path:
    for name, content in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(content)
    return root


def paths(entries: list[dict]) -> set[str]:
    return {e["path"] for e in entries}


def test_detignore_patterns(tmp_path: pathlib.Path) -> None:
    root = tree(
        tmp_path / "ctx",
        {
            ".detignore": "# a comment\n\n*.log\n!keep.log\ndata/\n/top.txt\nsub/anchored.txt\n",
            "train.py": "print()",
            "a.log": "x",
            "keep.log": "x",
            "data/big.bin": "x",
            "sub/data": "a file named data is not a dir",
            "top.txt": "x",
            "sub/top.txt": "x",
            "sub/anchored.txt": "x",
            "other/sub/anchored.txt": "x",
        },
    )
    got = paths(read_context_dir(root))
    assert "train.py" in got and "keep.log" in got
    assert "a.log" not in got
    assert "data" not in got and "data/big.bin" not in got
    assert "sub/data" in got  # dir/ matches directories only
    assert "top.txt" not in got and "sub/top.txt" in got  # /anchored only at the root
    assert "sub/anchored.txt" not in got and "other/sub/anchored.txt" in got
    assert "# a comment" not in got


def test_entries_are_v1files(tmp_path: pathlib.Path) -> None:
    root = tree(tmp_path / "ctx", {"pkg/mod.py": "X = 1\n"})
    entries = {e["path"]: e for e in read_context_dir(root)}
    assert entries["pkg"]["type"] == ord("5") and entries["pkg"]["content"] == ""
    assert entries["pkg/mod.py"]["type"] == ord("0")
    assert base64.b64decode(entries["pkg/mod.py"]["content"]) == b"X = 1\n"
    assert int(entries["pkg/mod.py"]["mtime"]) > 0


def test_symlink_out_of_dir_not_shipped(tmp_path: pathlib.Path) -> None:
    secret = tree(tmp_path / "outside", {"secret.txt": "password"})
    root = tree(tmp_path / "ctx", {"train.py": "", "inner.txt": "ok"})
    os.symlink(secret / "secret.txt", root / "leak.txt")
    os.symlink(secret, root / "leakdir")
    os.symlink(root / "inner.txt", root / "alias.txt")
    got = paths(read_context_dir(root))
    assert "leak.txt" not in got and not any(p.startswith("leakdir") for p in got)
    assert "train.py" in got


def test_size_limit(tmp_path: pathlib.Path) -> None:
    root = tree(tmp_path / "ctx", {"big.bin": "x" * 5000})
    with pytest.raises(ValueError, match=r"detignore"):
        read_context_dir(root, limit=1000)
    (root / ".detignore").write_text("big.bin\n")
    assert paths(read_context_dir(root, limit=1000)) == {".detignore"}


def test_includes_and_collision(tmp_path: pathlib.Path) -> None:
    root = tree(tmp_path / "ctx", {"train.py": "", "lib/x.py": ""})
    extra = tree(tmp_path / "extra" / "helpers", {"h.py": ""})
    got = paths(read_context_dir(root, includes=[extra]))
    assert {"helpers", "helpers/h.py", "train.py"} <= got
    clash = tree(tmp_path / "other" / "lib", {"y.py": ""})
    with pytest.raises(ValueError, match="lib"):
        read_context_dir(root, includes=[clash])
    with pytest.raises(ValueError, match="does not exist"):
        read_context_dir(root, includes=[tmp_path / "nope"])


def test_missing_context_dir(tmp_path: pathlib.Path) -> None:
    with pytest.raises(ValueError, match="does not exist"):
        read_context_dir(tmp_path / "missing")
