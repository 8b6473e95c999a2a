"""The one storage manager of det: any fsspec filesystem (local disk, S3, GCS, Azure, memory, ...).

Local filesystems are "direct access": checkpoints are written straight into their final directory.
Every other filesystem stages a checkpoint in a local temporary directory and uploads it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pathlib
import posixpath
import re
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

from determined.storage._base import (
    CheckpointNotFound,
    Paths,
    Selector,
    StorageManager,
    _is_within,
    validate_relpath,
    validate_storage_id,
    walk_local,
)

logger = logging.getLogger("determined.storage")

METADATA_FILE = "metadata.json"
"""Written by the checkpoint context into a checkpoint's root after its data files."""


def _is_local(fs: Any) -> bool:
    protocol = fs.protocol
    protocols = (protocol,) if isinstance(protocol, str) else tuple(protocol)
    return "file" in protocols or "local" in protocols


def glob_to_regex(glob: str) -> re.Pattern[str]:
    """Compile a checkpoint-relative glob: ``*`` and ``?`` stay within a segment, ``**`` spans any."""
    validate_relpath(glob, "globs")
    parts = glob.rstrip("/").split("/")
    regex = ""
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        if part == "**":
            regex += ".*" if last else "(?:[^/]+/)*"
            continue
        i = 0
        while i < len(part):
            char = part[i]
            if char == "*":
                regex += "[^/]*"
            elif char == "?":
                regex += "[^/]"
            elif char == "[" and "]" in part[i + 2 :]:
                end = part.index("]", i + 2)
                body = part[i + 1 : end].replace("\\", "\\\\")
                regex += "[^" + body[1:] + "]" if body.startswith("!") else "[" + body + "]"
                i = end
            else:
                regex += re.escape(char)
            i += 1
        if not last:
            regex += "/"
    return re.compile(regex + r"\Z", re.DOTALL)


class FsspecStorageManager(StorageManager):
    """Checkpoints stored as ``<root>/<storage_id>/<relpath>`` on an fsspec filesystem.

    Args:
        fs: the fsspec filesystem (e.g. ``fsspec.filesystem("s3", ...)``).
        root: the storage root on ``fs`` (``/mnt/ckpts``, ``bucket/prefix``, ...).
        direct_access: write checkpoints straight into ``root`` (only for local filesystems).
        temp_dir: where non-direct managers stage checkpoints (default: the system temp dir).
    """

    def __init__(
        self,
        fs: Any,
        root: str,
        *,
        direct_access: bool,
        temp_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        if direct_access and not _is_local(fs):
            raise ValueError(
                f"direct_access needs a local filesystem, not protocol {fs.protocol!r}"
            )
        self.fs = fs
        stripped = fs._strip_protocol(os.fspath(root))
        self.root = stripped.rstrip("/") or "/"
        self.direct_access = direct_access
        self.temp_dir = os.fspath(temp_dir) if temp_dir is not None else None
        self._local = _is_local(fs)

    def __repr__(self) -> str:
        protocol = self.fs.protocol if isinstance(self.fs.protocol, str) else self.fs.protocol[0]
        return f"FsspecStorageManager({protocol}://{self.root}, direct_access={self.direct_access})"

    # ----------------------------------------------------------------------------------- paths

    def _remote(self, storage_id: str, rel: str = "") -> str:
        base = posixpath.join(self.root, storage_id)
        return posixpath.join(base, rel) if rel else base

    def _temp_base(self) -> str:
        base = self.temp_dir or tempfile.gettempdir()
        os.makedirs(base, exist_ok=True)
        return base

    # ----------------------------------------------------------------------------- store path

    def pre_store_path(self, dst: str) -> pathlib.Path:
        dst = validate_storage_id(dst)
        if self.direct_access:
            path = pathlib.Path(self._remote(dst))
            path.mkdir(parents=True, exist_ok=True)
            return path
        # A fresh leaf directory per call: ranks sharing a machine (and a storage id) never collide,
        # and whoever removes the directory removes everything that was staged.
        flat = dst.replace("/", "_")
        return pathlib.Path(tempfile.mkdtemp(prefix=f"det-store-{flat}-", dir=self._temp_base()))

    def post_store_path(
        self, src: str | os.PathLike[str], dst: str, paths: Paths | None = None
    ) -> None:
        """Upload a staged directory and remove it (direct access: nothing to do).

        Unlike upstream, a ``metadata.json`` in the staged root is always uploaded, even when
        ``paths`` was computed before the checkpoint context wrote it.
        """
        dst = validate_storage_id(dst)
        if self.direct_access and _same_dir(src, self._remote(dst)):
            return
        try:
            if paths is not None and os.path.isfile(os.path.join(src, METADATA_FILE)):
                paths = set(paths) | {METADATA_FILE}
            self.upload(src, dst, paths)
        finally:
            if not self.direct_access:
                shutil.rmtree(src, ignore_errors=True)

    def store_path_is_direct_access(self) -> bool:
        return self.direct_access

    @contextlib.contextmanager
    def restore_path(self, src: str, selector: Selector | None = None) -> Iterator[pathlib.Path]:
        src = validate_storage_id(src)
        if self.direct_access:
            path = pathlib.Path(self._remote(src))
            if not path.is_dir():
                raise CheckpointNotFound(f"checkpoint {src!r} not found in {self!r}")
            if selector is not None:
                logger.debug("restore_path on direct-access storage exposes every file of %s", src)
            yield path
            return
        staging = tempfile.mkdtemp(prefix="det-restore-", dir=self._temp_base())
        try:
            path = pathlib.Path(staging, src)
            self.download(src, path, selector)
            yield path
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    # ------------------------------------------------------------------------ upload/download

    def upload(self, src: str | os.PathLike[str], dst: str, paths: Paths | None = None) -> None:
        dst = validate_storage_id(dst)
        resources = walk_local(src, refuse_outside_links=True)
        if paths is not None:
            resources = _select_paths(resources, paths, src)
        if self.direct_access and _same_dir(src, self._remote(dst)):
            return
        files = [rel for rel in resources if not rel.endswith("/")]
        dirs = [rel for rel in resources if rel.endswith("/")]
        for rel in dirs:
            if not any(other != rel and other.startswith(rel) for other in resources):
                self._make_remote_dir(self._remote(dst, rel.rstrip("/")))
        for rel in files:
            remote = self._remote(dst, rel)
            if self._local:
                os.makedirs(posixpath.dirname(remote), exist_ok=True)
            self.fs.put_file(os.path.join(os.fspath(src), rel), remote)
        if not resources:
            self._make_remote_dir(self._remote(dst))

    def _make_remote_dir(self, path: str) -> None:
        if self._local:
            os.makedirs(path, exist_ok=True)
            return
        self.fs.makedirs(path, exist_ok=True)
        self.fs.invalidate_cache(path)
        if not self.fs.isdir(path):
            # Object stores have no directories: keep an empty one as a zero-byte "dir/" marker.
            self.fs.pipe_file(path + "/", b"")

    def download(
        self, src: str, dst: str | os.PathLike[str], selector: Selector | None = None
    ) -> None:
        src = validate_storage_id(src)
        resources = self._remote_resources(src)
        dst_path = pathlib.Path(dst)
        dst_path.mkdir(parents=True, exist_ok=True)
        dst_real = os.path.realpath(dst_path)
        for rel in sorted(resources):
            validate_relpath(rel, f"stored path of checkpoint {src!r}")
            if selector is not None and not selector(rel):
                continue
            target = dst_path / rel.rstrip("/")
            parent = target if rel.endswith("/") else target.parent
            _safe_makedirs(parent, dst_real)
            if rel.endswith("/"):
                continue
            if not _is_within(os.path.realpath(target), dst_real):
                raise ValueError(f"refusing to download {rel!r}: {target} links outside {dst}")
            self.fs.get_file(self._remote(src, rel), os.fspath(target))

    # ---------------------------------------------------------------------------- list/delete

    def list_files(self, storage_id: str) -> dict[str, int]:
        return self._remote_resources(validate_storage_id(storage_id))

    def _remote_resources(self, storage_id: str) -> dict[str, int]:
        base = self._remote(storage_id)
        if not self._local:
            self.fs.invalidate_cache()
        found = self.fs.find(base, withdirs=True, detail=True)
        out: dict[str, int] = {}
        for name, info in found.items():
            name = self.fs._strip_protocol(name) + ("/" if name.endswith("/") else "")
            if not name.startswith(base + "/"):
                continue
            rel = name[len(base) + 1 :]
            if not rel:
                continue
            if rel.endswith("/") or info.get("type") == "directory":
                out[rel.rstrip("/") + "/"] = 0
            else:
                out[rel] = int(info.get("size") or 0)
        if not out and not self.fs.isdir(base):
            raise CheckpointNotFound(f"checkpoint {storage_id!r} not found in {self!r}")
        return out

    def delete(self, tgt: str, globs: list[str]) -> dict[str, int]:
        tgt = validate_storage_id(tgt)
        if isinstance(globs, str):
            raise ValueError("globs: expected a list of glob strings, got a single string")
        patterns = [glob_to_regex(glob) for glob in globs]
        if "**/*" in globs:
            self._remove_tree(self._remote(tgt))
            return {}
        try:
            resources = self._remote_resources(tgt)
        except CheckpointNotFound:
            return {}
        matched = [rel for rel in resources if any(p.match(rel.rstrip("/")) for p in patterns)]
        for rel in sorted(matched, key=lambda r: (r.endswith("/"), r)):
            remote = self._remote(tgt, rel.rstrip("/"))
            if rel.endswith("/"):
                self._remove_tree(remote)
            else:
                with contextlib.suppress(FileNotFoundError):
                    self.fs.rm_file(remote)
        try:
            remaining = self._remote_resources(tgt)
        except CheckpointNotFound:
            return {}
        if not remaining:
            self._remove_tree(self._remote(tgt))
        return remaining

    def _remove_tree(self, path: str) -> None:
        if self._local:
            shutil.rmtree(path, ignore_errors=True)
            return
        with contextlib.suppress(FileNotFoundError):
            self.fs.rm(path, recursive=True)
        with contextlib.suppress(FileNotFoundError):
            self.fs.rm_file(path + "/")  # an object store's empty-directory marker
        self.fs.invalidate_cache()


def _same_dir(a: str | os.PathLike[str], b: str) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


def _select_paths(
    resources: dict[str, int], paths: Paths, src: str | os.PathLike[str]
) -> dict[str, int]:
    selected: dict[str, int] = {}
    for path in paths:
        validate_relpath(path, "paths")
        if path in resources:
            selected[path] = resources[path]
        elif not path.endswith("/") and path + "/" in resources:
            selected[path + "/"] = 0
        else:
            raise FileNotFoundError(f"paths: {path!r} is not in {os.fspath(src)!r}")
    return selected


def _safe_makedirs(path: pathlib.Path, root_real: str) -> None:
    # realpath resolves the links among the components that already exist: check before creating.
    if not _is_within(os.path.realpath(path), root_real):
        raise ValueError(f"refusing to download into {path}: it links outside {root_real}")
    path.mkdir(parents=True, exist_ok=True)
