"""The storage-manager interface that checkpoint contexts talk to, and its path-safety rules.

A checkpoint lives at ``<storage root>/<storage_id>/<relative path>``. Every storage id and every
relative path crossing this interface is checked here, so no backend can be talked into reading or
writing outside its root (``..`` segments, absolute paths, symlinks pointing out of a directory).
"""

from __future__ import annotations

import abc
import contextlib
import os
import pathlib
import shutil
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager

Selector = Callable[[str], bool]
"""Chooses which checkpoint entries to download: gets a path relative to the checkpoint root
(directories end with ``/``) and returns True to keep it."""

Paths = set[str]
"""Relative paths (directories with a trailing ``/``) as returned by ``list_directory``."""


class CheckpointNotFound(FileNotFoundError):
    """The requested checkpoint does not exist in this storage."""


def validate_storage_id(storage_id: str) -> str:
    """Return ``storage_id`` if it is a safe, relative, non-empty id; raise ValueError otherwise."""
    if not isinstance(storage_id, str) or not storage_id.strip("/"):
        raise ValueError(f"storage_id: must be a non-empty string, got {storage_id!r}")
    _check_segments("storage_id", storage_id, storage_id.rstrip("/"))
    return storage_id.rstrip("/")


def validate_relpath(path: str, what: str = "path") -> str:
    """Return ``path`` (a checkpoint-relative path, directories may end with ``/``) if it is safe.

    Raises:
        ValueError: for empty, absolute or backslashed paths, and for ``.``/``..``/empty segments.
    """
    if not isinstance(path, str) or not path.rstrip("/"):
        raise ValueError(f"{what}: must be a non-empty relative path, got {path!r}")
    body = path[:-1] if path.endswith("/") else path
    _check_segments(what, path, body)
    return path


def _check_segments(what: str, original: str, body: str) -> None:
    if body.startswith("/") or os.path.isabs(body) or "\\" in body or "\x00" in body:
        raise ValueError(f"{what}: {original!r} must be relative (no leading '/' or '\\')")
    for segment in body.split("/"):
        if segment in ("", ".", ".."):
            raise ValueError(
                f"{what}: {original!r} may not contain '..', '.' or empty path segments"
            )


def _is_within(path: str, root: str) -> bool:
    try:
        return os.path.commonpath([path, root]) == root
    except ValueError:  # different drives
        return False


def walk_local(root: str | os.PathLike[str], *, refuse_outside_links: bool) -> dict[str, int]:
    """Map every entry below ``root`` to its size (directories: trailing ``/`` and 0).

    Symlinks are followed (a link to a file lists the file's size); symlink cycles raise ValueError.
    With ``refuse_outside_links``, a symlink whose target lies outside ``root`` raises ValueError, so
    an upload never copies files the directory does not own.
    """
    root_real = os.path.realpath(root)
    if not os.path.isdir(root_real):
        raise FileNotFoundError(f"not a directory: {os.fspath(root)}")
    out: dict[str, int] = {}

    def check_link(full: str, rel: str) -> str:
        target = os.path.realpath(full)
        if refuse_outside_links and not _is_within(target, root_real):
            raise ValueError(
                f"refusing to upload {rel!r}: it is a symlink pointing outside {os.fspath(root)!r}"
                f" (to {target!r})"
            )
        return target

    def walk(directory: str, prefix: str, ancestors: frozenset[str]) -> None:
        with os.scandir(directory) as entries:
            for entry in sorted(entries, key=lambda e: e.name):
                rel = prefix + entry.name
                full = os.path.join(directory, entry.name)
                target = check_link(full, rel) if entry.is_symlink() else full
                if entry.is_dir(follow_symlinks=True):
                    real = os.path.realpath(full)
                    if real in ancestors:
                        raise ValueError(f"symlink cycle at {rel!r} below {os.fspath(root)!r}")
                    out[rel + "/"] = 0
                    walk(full, rel + "/", ancestors | {real})
                elif os.path.exists(target):
                    out[rel] = os.path.getsize(target)
                elif refuse_outside_links:
                    raise ValueError(f"refusing to upload {rel!r}: it is a dangling symlink")

    walk(root_real, "", frozenset({root_real}))
    return out


class StorageManager(abc.ABC):
    """Moves checkpoint directories between the local disk and a checkpoint storage.

    The methods are those det's ``CheckpointContext`` needs. ``storage_id`` arguments (``dst``,
    ``src``, ``tgt``) name a checkpoint inside the storage; local directories are plain paths.
    """

    @abc.abstractmethod
    def pre_store_path(self, dst: str) -> pathlib.Path:
        """Create and return the local directory that a new checkpoint ``dst`` should be written to."""

    @abc.abstractmethod
    def post_store_path(
        self, src: str | os.PathLike[str], dst: str, paths: Paths | None = None
    ) -> None:
        """Finish a ``pre_store_path`` directory: upload it as ``dst`` (if needed) and clean up."""

    @contextlib.contextmanager
    def store_path(self, dst: str) -> Iterator[pathlib.Path]:
        """Yield a directory to write checkpoint ``dst`` into; it is stored when the block exits.

        If the block raises, nothing is uploaded; a staged (non-direct) directory is removed, while
        direct-access storage keeps what was written, as upstream does.
        """
        path = self.pre_store_path(dst)
        try:
            yield path
        except BaseException:
            if not self.store_path_is_direct_access():
                shutil.rmtree(path, ignore_errors=True)
            raise
        self.post_store_path(path, dst)

    @abc.abstractmethod
    def store_path_is_direct_access(self) -> bool:
        """True when ``pre_store_path`` is the final location (shared_fs, directory)."""

    @abc.abstractmethod
    def restore_path(
        self, src: str, selector: Selector | None = None
    ) -> AbstractContextManager[pathlib.Path]:
        """Context manager yielding a local directory holding checkpoint ``src``.

        Raises:
            CheckpointNotFound: when ``src`` is not in the storage.
        """

    @abc.abstractmethod
    def upload(self, src: str | os.PathLike[str], dst: str, paths: Paths | None = None) -> None:
        """Copy local directory ``src`` (or only ``paths`` inside it) to checkpoint ``dst``."""

    @abc.abstractmethod
    def download(
        self, src: str, dst: str | os.PathLike[str], selector: Selector | None = None
    ) -> None:
        """Copy checkpoint ``src`` (the entries ``selector`` keeps) into local directory ``dst``."""

    @abc.abstractmethod
    def delete(self, tgt: str, globs: list[str]) -> dict[str, int]:
        """Delete the entries of checkpoint ``tgt`` matching ``globs``; return what remains.

        ``["**/*"]`` deletes the whole checkpoint and returns ``{}``.
        """

    @abc.abstractmethod
    def list_files(self, storage_id: str) -> dict[str, int]:
        """The resources of a stored checkpoint: relative path -> size (directories end with ``/``)."""

    @staticmethod
    def list_directory(root: str | os.PathLike[str]) -> dict[str, int]:
        """Relative path -> size of everything below local directory ``root`` (dirs: ``x/`` -> 0)."""
        return walk_local(root, refuse_outside_links=False)

    @staticmethod
    def _list_directory(root: str | os.PathLike[str]) -> dict[str, int]:
        """Alias of ``list_directory`` under upstream's name."""
        return walk_local(root, refuse_outside_links=False)
