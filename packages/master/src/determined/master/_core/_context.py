"""Model definitions (the experiment's context directory) as tar.gz, built and extracted defensively.

Upstream clients upload a list of ``File`` objects ``{path, type, content (base64), mtime, mode, uid,
gid}`` where ``type`` is ``ord('0')`` for a regular file and ``ord('5')`` for a directory. The master
stores them as one tar.gz. Hostile entries (``..``, absolute paths, links, device files) are refused
both when the upload is packed and again when a tarball is extracted into a trial's work directory.
"""

from __future__ import annotations

import base64
import binascii
import io
import os
import pathlib
import posixpath
import tarfile
import time
from collections.abc import Iterable
from typing import Any

MAX_CONTEXT_BYTES = 95 * 1024 * 1024
"""The largest context directory accepted (upstream: 96 MiB gRPC limit minus 1 MiB)."""

REGULAR_FILE = ord("0")
DIRECTORY = ord("5")


class ContextError(ValueError):
    """The uploaded model definition is unacceptable (the message says which entry and why)."""


def _safe_relpath(path: str, where: str) -> str:
    if not isinstance(path, str) or not path:
        raise ContextError(f"{where}: path must be a non-empty string")
    if "\x00" in path:
        raise ContextError(f"{where}: path {path!r} contains a NUL byte")
    if path.startswith("/") or path.startswith("\\") or (len(path) > 1 and path[1] == ":"):
        raise ContextError(f"{where}: absolute path {path!r} is not allowed")
    parts = path.replace("\\", "/").split("/")
    if ".." in parts:
        raise ContextError(f"{where}: path {path!r} leaves the context directory ('..')")
    norm = posixpath.normpath(path.replace("\\", "/"))
    if norm in (".", ""):
        raise ContextError(f"{where}: path {path!r} names the context root")
    return norm


def pack_files(files: Iterable[dict[str, Any]], max_bytes: int = MAX_CONTEXT_BYTES) -> bytes | None:
    """Turn upstream ``File`` objects into a tar.gz; None when there are none.

    ``max_bytes`` bounds the files' total size (the master config's
    ``limits.max_context_bytes``; 0 or less: no bound).

    Raises:
        ContextError: a hostile or malformed entry, or a context over :data:`MAX_CONTEXT_BYTES`.
    """
    items = list(files)
    if not items:
        return None
    buffer = io.BytesIO()
    total = 0
    seen: set[str] = set()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for index, item in enumerate(items):
            where = f"modelDefinition[{index}]"
            if not isinstance(item, dict):
                raise ContextError(f"{where}: must be an object")
            path = _safe_relpath(item.get("path", ""), where)
            kind = item.get("type", REGULAR_FILE)
            if isinstance(kind, str) and len(kind) == 1:
                kind = ord(kind)
            try:
                kind = int(kind)
                mtime = int(float(item.get("mtime") or time.time()))
                mode = int(item.get("mode") or (0o755 if kind == DIRECTORY else 0o644))
            except (TypeError, ValueError) as e:
                raise ContextError(f"{where}: bad type, mtime or mode: {e}") from None
            if path in seen:
                raise ContextError(f"{where}: duplicate path {path!r}")
            seen.add(path)
            info = tarfile.TarInfo(path)
            info.mtime = mtime
            info.mode = mode & 0o777
            if kind == DIRECTORY:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif kind == REGULAR_FILE:
                try:
                    content = base64.b64decode(item.get("content") or "", validate=True)
                except (binascii.Error, ValueError):
                    raise ContextError(
                        f"{where}: content of {path!r} is not valid base64"
                    ) from None
                total += len(content)
                if 0 < max_bytes < total:
                    raise ContextError(
                        f"the model definition is larger than the master's limit of {max_bytes}"
                        " bytes (limits.max_context_bytes); use a .detignore file to leave large"
                        " files out"
                    )
                info.size = len(content)
                tar.addfile(info, io.BytesIO(content))
            else:
                raise ContextError(
                    f"{where}: {path!r} has type {kind}; only regular files (48) and directories"
                    " (53) are allowed"
                )
    data = buffer.getvalue()
    if 0 < max_bytes < len(data):
        raise ContextError(
            f"the model definition is larger than the master's limit of {max_bytes} bytes"
            " (limits.max_context_bytes)"
        )
    return data


def unpack_files(data: bytes | None) -> list[dict[str, Any]]:
    """The stored tar.gz back as upstream ``File`` objects (for GET .../model_def file trees)."""
    if not data:
        return []
    out: list[dict[str, Any]] = []
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        for member in tar.getmembers():
            content = b""
            if member.isfile():
                extracted = tar.extractfile(member)
                content = extracted.read() if extracted else b""
            out.append(
                {
                    "path": member.name,
                    "type": DIRECTORY if member.isdir() else REGULAR_FILE,
                    "content": base64.b64encode(content).decode(),
                    "mtime": str(int(member.mtime)),
                    "mode": member.mode,
                    "uid": 0,
                    "gid": 0,
                }
            )
    return out


_extract_bound = MAX_CONTEXT_BYTES


def allow_contexts_up_to(max_bytes: int) -> None:
    """Raise the bound :func:`extract` applies by default to ``max_bytes`` (a master whose
    ``limits.max_context_bytes`` is above 95 MiB, or 0: unbounded, calls it at start). The bound
    only ever grows, so a context accepted under the configured limit always unpacks."""
    global _extract_bound
    if _extract_bound > 0 and (max_bytes <= 0 or max_bytes > _extract_bound):
        _extract_bound = max_bytes if max_bytes > 0 else 0


def extract(data: bytes | None, dest: str | os.PathLike[str], max_bytes: int | None = None) -> None:
    """Extract a stored tar.gz into ``dest``, refusing anything but plain files and directories
    that stay inside ``dest``.

    Members are read one at a time and copied in chunks, counting bytes as they are written: an
    archive that expands past ``max_bytes`` in total (a tar bomb; 0 or less: no bound; None: the
    bound of :func:`allow_contexts_up_to`, 95 MiB by default) stops with :class:`ContextError`
    before its first byte over the bound reaches the disk. Files are opened without following
    links, so nothing is ever written outside ``dest``.
    """
    if max_bytes is None:
        max_bytes = _extract_bound
    root = pathlib.Path(dest).resolve()
    root.mkdir(parents=True, exist_ok=True)
    if not data:
        return
    total = 0
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        for member in tar:
            rel = _safe_relpath(member.name, "model definition")
            target = (root / rel).resolve()
            if target != root and root not in target.parents:
                raise ContextError(f"model definition: {member.name!r} leaves the work directory")
            if member.isdir():
                target.mkdir(parents=True, exist_ok=True)
            elif member.isfile():
                if 0 < max_bytes < total + member.size:
                    raise ContextError(
                        f"model definition: expands past {max_bytes} bytes at {member.name!r}"
                        " (limits.max_context_bytes)"
                    )
                target.parent.mkdir(parents=True, exist_ok=True)
                total += _copy_member(tar, member, target, max_bytes - total)
            else:
                raise ContextError(
                    f"model definition: {member.name!r} is not a regular file or directory"
                )


def _copy_member(
    tar: tarfile.TarFile, member: tarfile.TarInfo, target: pathlib.Path, budget: int
) -> int:
    """Copy one regular member to ``target`` (never through a link) in chunks; bytes written."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(target, flags, 0o600)
    except OSError as e:
        raise ContextError(f"model definition: cannot write {member.name!r}: {e}") from None
    written = 0
    source = tar.extractfile(member)
    with os.fdopen(fd, "wb") as f:
        while source is not None:
            chunk = source.read(1 << 20)
            if not chunk:
                break
            written += len(chunk)
            if 0 < budget < written:
                raise ContextError(f"model definition: {member.name!r} expands past its size")
            f.write(chunk)
    os.chmod(target, (member.mode & 0o777) | 0o600)
    return written
