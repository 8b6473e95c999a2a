"""Copy the TensorBoard files trials uploaded to checkpoint storage into one local log directory.

Trials upload to ``<storage root>/<cluster id>/tensorboard/experiment/<exp>/trial/<trial>/...`` (see
``determined.core``'s TensorBoard sync). TensorBoard reads one local directory in which each trial is
one run, ``trial_<id>/`` (a trial's sub-directories, e.g. Keras's ``train/`` and ``validation/`` or
another rank's ``rank_<n>/``, become runs ``trial_<id>/train``, ...). Event files grow by appends,
so an event file that grew is extended with the new bytes only (a ranged read on object stores),
which is also what TensorBoard's incremental reader expects; any other changed file (a profiler
trace, a projector config) is replaced whole.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import pathlib
import posixpath
import tempfile
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from determined import storage
from determined.core import plugins
from determined.core._tensorboard import experiment_sync_path, trial_sync_path

logger = logging.getLogger("determined.tensorboard")


def trial_storage_path(experiment_id: int, trial_id: int, cluster_id: str = "") -> str:
    """Where a trial's TensorBoard files live, relative to its checkpoint storage's root
    (upstream's ``<cluster id>/tensorboard/...``; without a cluster id, det's older layout)."""
    return trial_sync_path(experiment_id, trial_id, cluster_id)


def experiment_storage_path(experiment_id: int, cluster_id: str = "") -> str:
    """Where the TensorBoard files of an experiment's trials live, relative to the storage root."""
    return experiment_sync_path(experiment_id, cluster_id)


def run_name(trial_id: int) -> str:
    """The TensorBoard run (local directory) of a trial."""
    return f"trial_{trial_id}"


@dataclasses.dataclass(frozen=True)
class Source:
    """What one TensorBoard shows of one experiment.

    Attributes:
        experiment_id: the experiment.
        checkpoint_storage: its ``checkpoint_storage`` config (where its trials uploaded).
        trial_ids: the trials to show; ``None`` shows every trial, including trials that appear
            while TensorBoard runs.
    """

    experiment_id: int
    checkpoint_storage: Mapping[str, Any]
    trial_ids: tuple[int, ...] | None = None

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Source:
        """Parse ``{"experimentId", "checkpointStorage", "trialIds"?}`` (what the master writes)."""
        trial_ids = obj.get("trialIds")
        return cls(
            experiment_id=int(obj["experimentId"]),
            checkpoint_storage=dict(obj["checkpointStorage"]),
            trial_ids=None if trial_ids is None else tuple(int(t) for t in trial_ids),
        )

    def to_json(self) -> dict[str, Any]:
        """The inverse of :meth:`from_json`."""
        out: dict[str, Any] = {
            "experimentId": self.experiment_id,
            "checkpointStorage": dict(self.checkpoint_storage),
        }
        if self.trial_ids is not None:
            out["trialIds"] = list(self.trial_ids)
        return out


class EventSync:
    """Mirror the sources' TensorBoard files into ``logdir`` (one ``trial_<id>/`` per trial).

    Call :meth:`sync` for one pass, or :meth:`start` for a thread that repeats it every
    ``interval`` seconds until :meth:`stop`.
    """

    def __init__(
        self,
        sources: Iterable[Source],
        logdir: str | os.PathLike[str],
        interval: float = 5.0,
        cluster_id: str | None = None,
    ) -> None:
        self.sources = list(sources)
        self.cluster_id = os.environ.get("DET_CLUSTER_ID", "") if cluster_id is None else cluster_id
        """The master's cluster id (default ``$DET_CLUSTER_ID``): upstream's first path part."""
        self.logdir = pathlib.Path(logdir)
        self.interval = interval
        self.files_fetched = 0
        """Files copied or extended so far (over all passes)."""
        self._managers: dict[int, storage.StorageManager] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.logdir.mkdir(parents=True, exist_ok=True)

    def _manager(self, index: int) -> storage.StorageManager:
        manager = self._managers.get(index)
        if manager is None:
            manager = plugins.checkpoint_storage(dict(self.sources[index].checkpoint_storage))
            self._managers[index] = manager
        return manager

    def sync(self) -> int:
        """One pass over every source; returns how many files were copied or extended."""
        fetched = 0
        for index, source in enumerate(self.sources):
            try:
                fetched += self._sync_source(index, source)
            except Exception as exc:  # one unreachable storage must not stop the others
                logger.warning(
                    "tensorboard: syncing experiment %s failed: %s", source.experiment_id, exc
                )
        self.files_fetched += fetched
        return fetched

    def _sync_source(self, index: int, source: Source) -> int:
        fetched = 0
        prefixes = [experiment_storage_path(source.experiment_id, self.cluster_id)]
        if self.cluster_id:  # trials of det before the cluster id was part of the layout
            prefixes.append(experiment_storage_path(source.experiment_id))
        for prefix in prefixes:
            fetched += self._sync_prefix(index, source, prefix)
        return fetched

    def _sync_prefix(self, index: int, source: Source, prefix: str) -> int:
        manager = self._manager(index)
        try:
            remote = manager.list_files(prefix)
        except storage.CheckpointNotFound:
            return 0  # nothing uploaded yet
        wanted = None if source.trial_ids is None else set(source.trial_ids)
        plan: list[tuple[str, pathlib.Path, int]] = []
        for rel, size in remote.items():
            parts = rel.split("/", 2)
            if rel.endswith("/") or len(parts) < 3 or parts[0] != "trial":
                continue
            try:
                trial_id = int(parts[1])
            except ValueError:
                continue
            if wanted is not None and trial_id not in wanted:
                continue
            local = self.logdir / run_name(trial_id) / parts[2]
            local_size = local.stat().st_size if local.is_file() else -1
            if local_size != size:
                plan.append((rel, local, local_size))
        for rel, local, local_size in plan:
            self._fetch(manager, prefix, rel, local, local_size, remote[rel])
        return len(plan)

    def _fetch(
        self,
        manager: storage.StorageManager,
        prefix: str,
        rel: str,
        local: pathlib.Path,
        local_size: int,
        size: int,
    ) -> None:
        local.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(manager, storage.FsspecStorageManager):
            remote_path = posixpath.join(manager.root, prefix, rel)
            if 0 < local_size < size and "tfevents" in local.name:
                tail = manager.fs.cat_file(remote_path, start=local_size)
                with open(local, "ab") as out:
                    out.write(tail)
                return
            fd, staging = tempfile.mkstemp(prefix=".det-tb-", dir=local.parent)
            os.close(fd)
            try:
                manager.fs.get_file(remote_path, staging)
                os.replace(staging, local)
            finally:
                if os.path.exists(staging):
                    os.unlink(staging)
            return
        # Another storage plugin: its own download (whole file, through a staging directory).
        with tempfile.TemporaryDirectory(dir=self.logdir, prefix=".det-tb-") as staging_dir:
            manager.download(prefix, staging_dir, selector=lambda path: path == rel)
            os.replace(os.path.join(staging_dir, rel), local)

    def start(self) -> None:
        """Repeat :meth:`sync` every ``interval`` seconds on a daemon thread."""
        self._thread = threading.Thread(target=self._loop, name="det-tensorboard-sync", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.sync()

    def stop(self) -> None:
        """Stop the thread of :meth:`start` (after its current pass)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
