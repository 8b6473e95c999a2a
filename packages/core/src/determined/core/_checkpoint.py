"""CheckpointContext: save and load checkpoints in checkpoint storage, and report them to the master.

Storage ids are random UUIDs chosen by the chief. A checkpoint lives at ``<storage root>/<uuid>/`` and
holds the user's files plus ``metadata.json`` (exactly the user's metadata, merged across ranks when
sharded). Fixes over upstream: the caller's directory is never written to, ``metadata.json`` always
reaches cloud storage, required metadata is checked before anything is uploaded, and a failure inside a
sharded ``store_path`` on one rank fails the collective on every rank instead of hanging them.
"""

from __future__ import annotations

import contextlib
import copy
import enum
import json
import logging
import os
import pathlib
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from determined.core._checkpoint_sharding import (
    METADATA_FILE,
    Selector,
    list_resources,
    plan_sharded_upload,
    select_resources,
    shared_download_selector,
)

if TYPE_CHECKING:
    from determined.core._api import TrialAPI
    from determined.core._distributed import DistributedContext
    from determined.storage import StorageManager

logger = logging.getLogger("determined.core")


class DownloadMode(enum.Enum):
    """How ranks on one machine share a checkpoint download."""

    LocalWorkersShareDownload = "LOCAL_WORKERS_SHARE_DOWNLOAD"
    """Every rank calls in step; only the local chief downloads (the default)."""
    NoSharedDownload = "NO_SHARED_DOWNLOAD"
    """Every caller downloads for itself, with no coordination."""


def merge_resources(all_resources: list[dict[str, int]]) -> dict[str, int]:
    """Union of several ranks' ``{relpath: size}`` listings."""
    merged: dict[str, int] = {}
    for resources in all_resources:
        merged.update(resources)
    return merged


def merge_metadata(all_metadata: list[dict[str, Any]]) -> dict[str, Any]:
    """Deep-merge several ranks' metadata dicts.

    Dicts merge key by key, recursively; equal values are fine; two different non-dict values for one
    key raise RuntimeError naming the key.
    """

    def merge(into: dict[str, Any], other: dict[str, Any], where: str) -> None:
        for key, value in other.items():
            if key not in into:
                into[key] = copy.deepcopy(value)
            elif isinstance(into[key], dict) and isinstance(value, dict):
                merge(into[key], value, f"{where}{key}.")
            elif into[key] != value:
                raise RuntimeError(
                    f"refusing to upload with metadata conflicts: {where}{key} is {into[key]!r} on one "
                    f"rank and {value!r} on another"
                )

    merged: dict[str, Any] = {}
    for metadata in all_metadata:
        if metadata:
            merge(merged, metadata, "")
    return merged


class CheckpointContext:
    """Save and restore checkpoints; one implementation on-cluster and off (the backend differs).

    Args:
        distributed: this process's DistributedContext.
        storage_manager: where checkpoint files go.
        backend: the master client, or the local backend off-cluster.
        task_id: reported with every checkpoint.
        allocation_id: reported with every checkpoint.
        storage_backend_id: the master's id for this storage config (from ``runs/start``).
        require_steps_completed: reject metadata without ``steps_completed`` before uploading (the
            master needs it to resume).
        on_report: called after each report (tensorboard sync in AUTO mode).
    """

    def __init__(
        self,
        distributed: DistributedContext,
        storage_manager: StorageManager,
        backend: TrialAPI,
        *,
        task_id: str = "",
        allocation_id: str | None = None,
        storage_backend_id: int | None = None,
        require_steps_completed: bool = False,
        on_report: Callable[[], object] | None = None,
    ) -> None:
        self._dist = distributed
        self._storage_manager = storage_manager
        self._backend = backend
        self._task_id = task_id
        self._allocation_id = allocation_id
        self._storage_backend_id = storage_backend_id
        self._require_steps_completed = require_steps_completed
        self._on_report = on_report

    # ---- saving ---------------------------------------------------------------------------------
    def upload(
        self,
        ckpt_dir: str | os.PathLike[str] | None,
        metadata: dict[str, Any] | None = None,
        *,
        shard: bool = False,
        selector: Selector | None = None,
    ) -> str:
        """Upload the files of ``ckpt_dir`` as a new checkpoint and report it; returns its storage id.

        With ``shard=False`` only the chief may call. With ``shard=True`` every rank must call (some may
        pass ``ckpt_dir=None``): ranks sharing one directory upload it once, a file that two ranks hold
        with different content is an error on every rank, and metadata dicts are merged.
        """
        if not shard:
            self._require_chief("upload")
            if ckpt_dir is None:
                raise RuntimeError("checkpoint.upload(ckpt_dir=None) is only valid with shard=True")
            metadata = dict(metadata or {})
            self._check_metadata(metadata)
            root = pathlib.Path(ckpt_dir)
            resources = select_resources(list_resources(self._storage_manager, root), selector)
            storage_id = str(uuid.uuid4())
            self._storage_manager.upload(
                root, storage_id, paths=set(resources) if selector else None
            )
            resources[METADATA_FILE] = self._write_metadata_file(storage_id, metadata)
            self._report(storage_id, resources, metadata)
            return storage_id

        storage_id = self._dist.broadcast(str(uuid.uuid4()) if self._dist.rank == 0 else None)
        shard_root = pathlib.Path(ckpt_dir) if ckpt_dir is not None else None
        merged = self._merge_metadata_or_fail(metadata)
        if self._dist.rank == 0:
            self._check_metadata(merged)
        mine = plan_sharded_upload(self._dist, self._storage_manager, shard_root, selector)
        if mine:
            assert shard_root is not None
            self._storage_manager.upload(shard_root, storage_id, paths=set(mine))
        all_resources = self._dist.allgather(mine)  # also the barrier: every upload finished
        if self._dist.rank == 0:
            resources = merge_resources(all_resources)
            resources[METADATA_FILE] = self._write_metadata_file(storage_id, merged)
            self._report(storage_id, resources, merged)
        return str(storage_id)

    def _merge_metadata_or_fail(self, metadata: dict[str, Any] | None) -> dict[str, Any]:
        gathered = self._dist.allgather(dict(metadata or {}))
        return merge_metadata(gathered)

    @contextlib.contextmanager
    def store_path(
        self, metadata: dict[str, Any] | None = None, *, shard: bool = False
    ) -> Iterator[tuple[pathlib.Path, str]]:
        """Yield ``(path, storage_id)``: write checkpoint files into ``path``; on exit they are stored.

        With ``shard=False`` only the chief may call; with ``shard=True`` every rank must. If the block
        raises, nothing is reported and the partial checkpoint is removed.
        """
        if not shard:
            self._require_chief("store_path")
            metadata = dict(metadata or {})
            self._check_metadata(metadata)
            storage_id = str(uuid.uuid4())
            path = self._storage_manager.pre_store_path(storage_id)
            try:
                yield path, storage_id
            except BaseException:
                self._discard(path, storage_id)
                raise
            self._finish_store(path, storage_id, metadata)
            return

        storage_id = self._dist.broadcast(str(uuid.uuid4()) if self._dist.rank == 0 else None)
        path = self._storage_manager.pre_store_path(storage_id)
        failed: BaseException | None = None
        try:
            yield path, storage_id
        except BaseException as exc:
            failed = exc
        # Every rank learns whether any rank failed, so nobody waits on a peer that gave up.
        failures = self._dist.allgather(None if failed is None else repr(failed))
        if any(failures):
            if self._dist.rank == 0:
                self._discard(path, storage_id)
            if failed is not None:
                raise failed
            bad = [rank for rank, f in enumerate(failures) if f]
            raise RuntimeError(
                f"sharded store_path failed on rank(s) {bad}: {next(f for f in failures if f)}"
            )
        merged = self._merge_metadata_or_fail(metadata)
        if self._dist.rank == 0:
            self._check_metadata(merged)
        if self._storage_manager.store_path_is_direct_access():
            self._dist.allgather(None)  # every rank finished writing into the shared directory
            if self._dist.rank == 0:
                self._finish_store(path, storage_id, merged)
            self._dist.allgather(None)
            return
        mine = plan_sharded_upload(self._dist, self._storage_manager, path, None)
        if mine:
            self._storage_manager.upload(path, storage_id, paths=set(mine))
        all_resources = self._dist.allgather(mine)
        shutil.rmtree(path, ignore_errors=True)
        if self._dist.rank == 0:
            resources = merge_resources(all_resources)
            resources[METADATA_FILE] = self._write_metadata_file(storage_id, merged)
            self._report(storage_id, resources, merged)

    def _finish_store(self, path: pathlib.Path, storage_id: str, metadata: dict[str, Any]) -> None:
        (path / METADATA_FILE).write_text(json.dumps(metadata, indent=2))
        resources = list_resources(self._storage_manager, path)
        self._storage_manager.post_store_path(path, storage_id)
        self._report(storage_id, resources, metadata)

    def _discard(self, path: pathlib.Path, storage_id: str) -> None:
        if self._storage_manager.store_path_is_direct_access():
            with contextlib.suppress(Exception):
                self._storage_manager.delete(storage_id, ["**/*"])
        else:
            shutil.rmtree(path, ignore_errors=True)

    def _write_metadata_file(self, storage_id: str, metadata: dict[str, Any]) -> int:
        with tempfile.TemporaryDirectory(prefix="det-metadata-") as tmp:
            target = pathlib.Path(tmp, METADATA_FILE)
            target.write_text(json.dumps(metadata, indent=2))
            self._storage_manager.upload(pathlib.Path(tmp), storage_id, paths={METADATA_FILE})
            return target.stat().st_size

    def _check_metadata(self, metadata: dict[str, Any]) -> None:
        if self._require_steps_completed and "steps_completed" not in metadata:
            raise ValueError(
                "checkpoint metadata must include 'steps_completed' (the master resumes from it); "
                "nothing was uploaded"
            )

    def _report(self, storage_id: str, resources: dict[str, int], metadata: dict[str, Any]) -> None:
        self._backend.report_checkpoint(
            storage_id,
            task_id=self._task_id,
            allocation_id=self._allocation_id,
            resources=resources,
            metadata=metadata,
            storage_id=self._storage_backend_id,
        )
        if self._on_report is not None:
            self._on_report()

    # ---- loading --------------------------------------------------------------------------------
    def download(
        self,
        storage_id: str,
        ckpt_dir: str | os.PathLike[str],
        download_mode: DownloadMode = DownloadMode.LocalWorkersShareDownload,
        *,
        selector: Selector | None = None,
    ) -> None:
        """Download a checkpoint into ``ckpt_dir`` (each rank's own dir, or one shared per machine)."""
        if download_mode == DownloadMode.NoSharedDownload:
            self._storage_manager.download(storage_id, pathlib.Path(ckpt_dir), selector=selector)
            return
        wanted = shared_download_selector(self._dist, self._storage_manager, storage_id, selector)
        error = None
        if self._dist.local_rank == 0:
            try:
                self._storage_manager.download(storage_id, pathlib.Path(ckpt_dir), selector=wanted)
            except Exception as exc:
                error = exc
        errors = self._dist.allgather_local(None if error is None else repr(error))
        if error is not None:
            raise error
        if any(errors):
            raise RuntimeError(
                f"checkpoint download failed on the local chief: {next(e for e in errors if e)}"
            )

    @contextlib.contextmanager
    def restore_path(
        self,
        storage_id: str,
        download_mode: DownloadMode = DownloadMode.LocalWorkersShareDownload,
        *,
        selector: Selector | None = None,
    ) -> Iterator[pathlib.Path]:
        """Yield a local directory holding the checkpoint; it stays valid until every local rank exits."""
        if download_mode == DownloadMode.NoSharedDownload:
            with self._storage_manager.restore_path(storage_id, selector=selector) as path:
                yield pathlib.Path(path)
            return
        wanted = shared_download_selector(self._dist, self._storage_manager, storage_id, selector)
        if self._dist.local_rank != 0:
            shared = self._dist.broadcast_local(None)
            if isinstance(shared, str) and shared.startswith("error:"):
                raise RuntimeError(f"checkpoint restore failed on the local chief: {shared[6:]}")
            try:
                yield pathlib.Path(shared)
            finally:
                self._dist.gather_local(None)
            return
        try:
            manager = self._storage_manager.restore_path(storage_id, selector=wanted)
            path = manager.__enter__()
        except Exception as exc:
            self._dist.broadcast_local(f"error:{exc!r}")
            raise
        self._dist.broadcast_local(str(path))
        try:
            yield pathlib.Path(path)
        finally:
            try:
                self._dist.gather_local(None)  # wait for every local rank to leave the block
            finally:
                manager.__exit__(None, None, None)

    # ---- other ----------------------------------------------------------------------------------
    def delete(self, storage_id: str) -> None:
        """Delete a checkpoint's files from storage and tell the master what remains (nothing)."""
        remaining = self._storage_manager.delete(storage_id, ["**/*"])
        self._backend.patch_checkpoint_resources(storage_id, dict(remaining or {}))

    def get_metadata(self, storage_id: str) -> dict[str, Any]:
        """The metadata reported with a checkpoint."""
        checkpoint = self._backend.get_checkpoint(storage_id)
        return dict(checkpoint.get("metadata") or {})

    def _require_chief(self, what: str) -> None:
        if self._dist.rank != 0:
            raise RuntimeError(
                f"checkpoint.{what}() with shard=False may only be called on the chief (rank 0); "
                f"this is rank {self._dist.rank}. Use shard=True to save from every rank."
            )
