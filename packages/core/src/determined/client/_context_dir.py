"""Package a model-definition (context) directory for experiment creation, honouring ``.detignore``.

The result is upstream's list of ``v1File`` objects: ``{path, type, content (base64), mtime, mode, uid,
gid}`` with ``type`` ``ord("0")`` for a file and ``ord("5")`` for a directory, so the same request body
works against a Determined master and a det master.
"""

from __future__ import annotations

import base64
import fnmatch
import os
import pathlib
from typing import Any

MAX_CONTEXT_SIZE = 95 * 1024 * 1024
"""Upstream's limit on an uploaded context (the master's 96 MiB request cap less 1 MiB); the one
definition the SDK, the CLI and the Hydra launcher share."""
FILE_TYPE = ord("0")
DIR_TYPE = ord("5")


class _Ignore:
    """gitignore-style patterns from one ``.detignore`` (``#`` comments, ``!`` negation, ``dir/``, ``/anchored``)."""

    def __init__(self, text: str) -> None:
        self.rules: list[tuple[bool, bool, bool, str]] = []  # (negate, dir_only, anchored, pattern)
        for raw in text.splitlines():
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            negate = line.startswith("!")
            line = line[1:] if negate else line
            dir_only = line.endswith("/")
            line = line.rstrip("/")
            anchored = "/" in line
            self.rules.append((negate, dir_only, anchored, line.lstrip("/")))

    def ignored(self, relpath: str, is_dir: bool) -> bool:
        result = False
        name = relpath.rsplit("/", 1)[-1]
        for negate, dir_only, anchored, pattern in self.rules:
            if dir_only and not is_dir:
                continue
            target = relpath if anchored else name
            if fnmatch.fnmatchcase(target, pattern) or (
                anchored
                and "**" in pattern
                and fnmatch.fnmatchcase(relpath, pattern.replace("**/", ""))
            ):
                result = not negate
        return result


def _entry(archive_path: str, path: pathlib.Path, is_dir: bool) -> dict[str, Any]:
    st = path.stat()
    content = "" if is_dir else base64.b64encode(path.read_bytes()).decode()
    return {
        "path": archive_path,
        "type": DIR_TYPE if is_dir else FILE_TYPE,
        "content": content,
        "mtime": str(int(st.st_mtime)),
        "mode": st.st_mode,
        "uid": 0,
        "gid": 0,
    }


def _walk(root: pathlib.Path, prefix: str, out: list[dict[str, Any]]) -> None:
    detignore = root / ".detignore"
    ignore = _Ignore(detignore.read_text() if detignore.is_file() else "")
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        rel_dir = pathlib.Path(dirpath).relative_to(root).as_posix()
        rel_dir = "" if rel_dir == "." else rel_dir
        kept_dirs = []
        for d in sorted(dirnames):
            rel = f"{rel_dir}/{d}" if rel_dir else d
            full = pathlib.Path(dirpath, d)
            if ignore.ignored(rel, True) or full.is_symlink():
                continue
            kept_dirs.append(d)
            out.append(_entry(f"{prefix}{rel}", full, True))
        dirnames[:] = kept_dirs
        for f in sorted(filenames):
            rel = f"{rel_dir}/{f}" if rel_dir else f
            full = pathlib.Path(dirpath, f)
            if ignore.ignored(rel, False) or not full.is_file():
                continue
            if full.is_symlink():
                target = full.resolve()
                if root.resolve() not in target.parents:
                    continue  # never ship what a link outside the context points at
            out.append(_entry(f"{prefix}{rel}", full, False))


class ContextTooLargeError(ValueError):
    """The packaged context is over the limit.

    Attributes:
        size: the total size of the files, in bytes.
        limit: the limit it exceeds, in bytes.
        sizes: each file's path and size, biggest first (for a message naming the culprits).
    """

    def __init__(self, size: int, limit: int, sizes: list[tuple[str, int]]) -> None:
        super().__init__(
            f"the context is {size / 2**20:.1f} MiB, over the {limit / 2**20:.0f} MiB limit: "
            "list large files in a .detignore file"
        )
        self.size = size
        self.limit = limit
        self.sizes = sizes


def read_context_dir(
    context_dir: str | os.PathLike[str] | None,
    includes: list[str | os.PathLike[str]] | tuple[()] = (),
    limit: int | None = None,
) -> list[dict[str, Any]]:
    """Return the files of ``context_dir`` (and each include, under its own name) as v1File dicts.

    Raises:
        ValueError: the directory is missing or an include collides with another entry.
        ContextTooLargeError: the total size exceeds ``limit`` (default :data:`MAX_CONTEXT_SIZE`;
            use ``.detignore`` to leave files out).
    """
    files: list[dict[str, Any]] = []
    if context_dir is not None:
        root = pathlib.Path(context_dir)
        if not root.is_dir():
            raise ValueError(
                f"context directory {str(root)!r} does not exist or is not a directory"
            )
        _walk(root, "", files)
    for include in includes:
        path = pathlib.Path(include)
        name = path.resolve().name
        if not path.exists() or not name:
            raise ValueError(f"include {str(include)!r} does not exist")
        if path.is_file():
            files.append(_entry(name, path, False))
        else:
            files.append(_entry(name, path, True))
            _walk(path, f"{name}/", files)
    roots = [f["path"] for f in files if "/" not in f["path"]]
    duplicates = sorted({p for p in roots if roots.count(p) > 1})
    if duplicates:
        raise ValueError(f"duplicate paths in the context: {', '.join(duplicates)}")
    sizes = {f["path"]: len(f["content"]) * 3 // 4 for f in files}
    size = sum(sizes.values())
    limit = MAX_CONTEXT_SIZE if limit is None else limit
    if size > limit:
        biggest = sorted(sizes.items(), key=lambda kv: kv[1], reverse=True)
        raise ContextTooLargeError(size, limit, biggest)
    return files
