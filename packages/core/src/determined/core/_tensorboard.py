"""TensorBoard files: where a trial writes them locally and how they reach checkpoint storage.

Remote layout (upstream's):
``<storage root>/<cluster id>/tensorboard/experiment/<exp id>/trial/<trial id>/<file>``; trials of
masters that did not tell them a cluster id (and det before 0.1) upload without the first part.
"""

from __future__ import annotations

import enum
import logging
import os
import pathlib
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from determined.storage import StorageManager

logger = logging.getLogger("determined.core")


class TensorboardMode(enum.Enum):
    """Who uploads TensorBoard files."""

    AUTO = "AUTO"
    """det uploads everything under ``get_tensorboard_path()`` after checkpoints and at close."""
    MANUAL = "MANUAL"
    """The user calls ``core_context.train.upload_tensorboard_files()``."""


def experiment_sync_path(experiment_id: int, cluster_id: str = "") -> str:
    """Where an experiment's TensorBoard files live, relative to its checkpoint storage's root."""
    path = f"tensorboard/experiment/{experiment_id}"
    return f"{cluster_id}/{path}" if cluster_id else path


def trial_sync_path(experiment_id: int, trial_id: int, cluster_id: str = "") -> str:
    """Where a trial uploads its TensorBoard files, relative to the storage root."""
    return f"{experiment_sync_path(experiment_id, cluster_id)}/trial/{trial_id}"


def default_tensorboard_path(
    allocation_id: str | None, rank: int, cluster_id: str = ""
) -> pathlib.Path:
    """A per-allocation, per-rank local directory (off-cluster: per process).

    ``cluster_id`` (the master's) is part of the name: trials of det's masters share one machine's
    temporary directory, unlike upstream's containers, and an allocation id is unique only within
    its master (experiment 1 of two masters, created in the same second, gets the same ids: the
    default experiment seed is the time), so two trials would otherwise write, and delete, the
    same directory."""
    tag = allocation_id or f"local-{os.getpid()}"
    if allocation_id and cluster_id:
        tag = f"{cluster_id}-{tag}"
    return pathlib.Path(tempfile.gettempdir(), f"tensorboard-{tag}-{rank}")


class TensorboardSync:
    """Uploads new or changed files of a local TensorBoard directory to storage."""

    def __init__(
        self,
        storage: StorageManager,
        local_path: pathlib.Path,
        remote_prefix: str,
        rank: int,
        min_interval: float = 1.0,
    ) -> None:
        self.storage = storage
        self.local_path = local_path
        self.remote_prefix = remote_prefix
        self.rank = rank
        self.min_interval = min_interval
        self._seen: dict[str, tuple[int, float]] = {}
        self._last = 0.0
        self._lock = threading.Lock()

    def sync(
        self,
        selector: Callable[[str], bool] = lambda _: True,
        mangler: Callable[[str, int], str] = lambda path, _rank: path,
        *,
        force: bool = True,
    ) -> list[str]:
        """Upload files changed since the last sync; returns their remote relative paths."""
        with self._lock:
            now = time.monotonic()
            if not force and now - self._last < self.min_interval:
                return []
            self._last = now
            if not self.local_path.is_dir():
                return []
            changed = []
            for path in sorted(self.local_path.rglob("*")):
                if not path.is_file():
                    continue
                rel = path.relative_to(self.local_path).as_posix()
                st = path.stat()
                signature = (st.st_size, st.st_mtime)
                if self._seen.get(rel) == signature or not selector(rel):
                    continue
                changed.append((rel, signature))
            if not changed:
                return []
            uploaded = []
            with tempfile.TemporaryDirectory(prefix="det-tb-") as staging:
                for rel, _ in changed:
                    target = pathlib.Path(staging, mangler(rel, self.rank))
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(self.local_path / rel, target)
                    uploaded.append(target.relative_to(staging).as_posix())
                self.storage.upload(pathlib.Path(staging), self.remote_prefix, paths=set(uploaded))
            for rel, signature in changed:
                self._seen[rel] = signature
            return uploaded
