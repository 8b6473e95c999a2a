"""``Checkpoint``: a checkpoint the master knows, with download and metadata edits."""

from __future__ import annotations

import dataclasses
import enum
import json
import logging
import os
import pathlib
import sys
from collections.abc import Iterable
from typing import Any

from determined.client import APIError, Client, Session
from determined.experimental._metrics import INFERENCE_SOURCE, TrialMetrics
from determined.experimental._util import member

logger = logging.getLogger("determined.client")


class DownloadMode(enum.Enum):
    """How ``Checkpoint.download`` gets the files.

    Attributes:
        DIRECT: read the checkpoint storage from this machine.
        MASTER: let the master read it and stream a tarball.
        AUTO: DIRECT, falling back to MASTER when the storage is not reachable from here.
    """

    DIRECT = "direct"
    MASTER = "master"
    AUTO = "auto"

    def __str__(self) -> str:
        return self.value


class CheckpointState(enum.Enum):
    """The state of a checkpoint."""

    ACTIVE = "STATE_ACTIVE"
    COMPLETED = "STATE_COMPLETED"
    ERROR = "STATE_ERROR"
    DELETED = "STATE_DELETED"
    PARTIALLY_DELETED = "STATE_PARTIALLY_DELETED"


class CheckpointSortBy(enum.Enum):
    """Checkpoint attributes a checkpoint list can be sorted by (or pass a metric name)."""

    UUID = "SORT_BY_UUID"
    TRIAL_ID = "SORT_BY_TRIAL_ID"
    BATCH_NUMBER = "SORT_BY_BATCH_NUMBER"
    END_TIME = "SORT_BY_END_TIME"
    STATE = "SORT_BY_STATE"
    SEARCHER_METRIC = "SORT_BY_SEARCHER_METRIC"


class CheckpointStateException(Exception):
    """The checkpoint is in a state that does not allow the operation (e.g. DELETED)."""


class ProxiedDownloadFailed(Exception):
    """The master could not serve the checkpoint's files."""


class MultipleDownloadsFailed(Exception):
    """AUTO mode: neither a direct nor a proxied download worked."""


@dataclasses.dataclass
class CheckpointTrainingMetadata:
    """What training produced a checkpoint."""

    experiment_config: dict[str, Any]
    experiment_id: int
    trial_id: int
    hparams: dict[str, Any]
    validation_metrics: dict[str, Any]

    @classmethod
    def _from_json(cls, training: dict[str, Any] | None) -> CheckpointTrainingMetadata | None:
        if not training or not training.get("trialId"):
            return None
        return cls(
            experiment_config=dict(training.get("experimentConfig") or {}),
            experiment_id=int(training.get("experimentId") or 0),
            trial_id=int(training["trialId"]),
            hparams=dict(training.get("hparams") or {}),
            validation_metrics=dict(training.get("validationMetrics") or {}),
        )


class Checkpoint:
    """A checkpoint of a trial, as the master records it.

    Obtained from ``client.get_checkpoint(uuid)``, ``Experiment.list_checkpoints()`` or
    ``Trial.list_checkpoints()``. Attributes are cached; :meth:`reload` refreshes them.

    Attributes:
        uuid: the checkpoint's id (its directory name in the checkpoint storage).
        task_id, allocation_id: the task and allocation that saved it.
        report_time: when it was reported (RFC 3339).
        resources: relative path -> size of its files.
        metadata: its user metadata (``steps_completed`` and whatever the trial added).
        state: a :class:`CheckpointState`.
        training: a :class:`CheckpointTrainingMetadata`, or None for non-training checkpoints.
    """

    def __init__(self, session: Session, uuid: str) -> None:
        self._session = session
        self._api = Client(session)
        self.uuid = uuid
        self.task_id: str | None = None
        self.allocation_id: str | None = None
        self.report_time: str | None = None
        self.resources: dict[str, Any] | None = None
        self.metadata: dict[str, Any] | None = None
        self.state: CheckpointState | None = None
        self.training: CheckpointTrainingMetadata | None = None

    def __repr__(self) -> str:
        trial = f", trial_id={self.training.trial_id}" if self.training else ""
        return f"Checkpoint(uuid={self.uuid}, task_id={self.task_id}{trial})"

    def _hydrate(self, data: dict[str, Any]) -> None:
        self.task_id = data.get("taskId")
        self.allocation_id = data.get("allocationId")
        self.report_time = data.get("reportTime")
        self.resources = dict(data.get("resources") or {})
        self.metadata = dict(data.get("metadata") or {})
        self.state = member(CheckpointState, data.get("state"))
        self.training = CheckpointTrainingMetadata._from_json(data.get("training"))

    @classmethod
    def _from_json(cls, data: dict[str, Any], session: Session) -> Checkpoint:
        ckpt = cls(session, str(data["uuid"]))
        ckpt._hydrate(data)
        return ckpt

    def reload(self) -> None:
        """Refresh the cached attributes from the master."""
        self._hydrate(self._api.checkpoints.get(self.uuid)["checkpoint"])

    # ------------------------------------------------------------------------------- download

    def download(
        self,
        path: str | os.PathLike[str] | None = None,
        mode: DownloadMode = DownloadMode.AUTO,
        *,
        progress: bool = False,
    ) -> str:
        """Download the checkpoint's files and return the local directory.

        Args:
            path: the directory to put the files in (default ``checkpoints/<uuid>`` under the
                working directory). A directory already holding a ``metadata.json`` is reused.
            mode: a :class:`DownloadMode` (or its value); AUTO reads the storage directly and
                falls back to the master.
            progress: print each file (direct) or the bytes received (master) to stderr.

        Raises:
            CheckpointStateException: the checkpoint is not COMPLETED or PARTIALLY_DELETED.
            MultipleDownloadsFailed: AUTO mode and neither way worked.
        """
        if self.state is None:
            self.reload()
        if self.state not in (CheckpointState.COMPLETED, CheckpointState.PARTIALLY_DELETED):
            state = self.state.name if self.state else "unknown"
            raise CheckpointStateException(
                f"checkpoint {self.uuid} is {state}: only COMPLETED or PARTIALLY_DELETED "
                "checkpoints can be downloaded"
            )
        mode = DownloadMode(mode.value if isinstance(mode, DownloadMode) else str(mode))
        local = pathlib.Path(path) if path is not None else pathlib.Path("checkpoints", self.uuid)
        if not any((local / name).exists() for name in ("metadata.json", "MLmodel")):
            if mode == DownloadMode.DIRECT:
                self._download_direct(local, progress)
            elif mode == DownloadMode.MASTER:
                self._download_via_master(local, progress)
            else:
                self._download_auto(local, progress)
        if not (local / "metadata.json").exists():
            self.write_metadata_file(str(local / "metadata.json"))
        return str(local)

    def _storage_config(self) -> dict[str, Any]:
        if self.training is None:
            raise CheckpointStateException(
                f"checkpoint {self.uuid} was not saved by a trial; download it with mode=master"
            )
        config = self.training.experiment_config.get("checkpoint_storage")
        if not isinstance(config, dict):
            raise CheckpointStateException(
                f"checkpoint {self.uuid}: its experiment config names no checkpoint_storage"
            )
        return dict(config)

    def _download_direct(self, local: pathlib.Path, progress: bool) -> None:
        from determined.core import _hooks

        manager = _hooks.checkpoint_storage(self._storage_config())

        def show(rel: str) -> bool:
            if progress and not rel.endswith("/"):
                print(f"checkpoint {self.uuid}: {rel}", file=sys.stderr)
            return True

        manager.download(self.uuid, local, show)

    def _download_auto(self, local: pathlib.Path, progress: bool) -> None:
        try:
            self._download_direct(local, progress)
            return
        except (FileNotFoundError, PermissionError, ImportError, ValueError) as direct:
            logger.info("direct download of %s failed (%s); asking the master", self.uuid, direct)
            reason = direct
        try:
            self._download_via_master(local, progress)
        except Exception as proxied:
            raise MultipleDownloadsFailed(
                f"checkpoint {self.uuid}: reading the storage directly failed ({reason}) and "
                f"so did the download through the master ({proxied})"
            ) from proxied

    def _download_via_master(self, local: pathlib.Path, progress: bool) -> None:
        def show(received: int) -> None:
            print(f"checkpoint {self.uuid}: {received} bytes", file=sys.stderr)

        try:
            self._api.checkpoints.download(self.uuid, local, on_chunk=show if progress else None)
        except APIError as exc:
            raise ProxiedDownloadFailed(
                f"the master could not serve checkpoint {self.uuid} ({exc.status}): {exc.message}"
            ) from None

    # ------------------------------------------------------------------------------- metadata

    def write_metadata_file(self, path: str) -> None:
        """Write the checkpoint's metadata as JSON to ``path``."""
        with open(path, "w") as f:
            json.dump(self.metadata or {}, f, indent=2)

    def _push_metadata(self, metadata: dict[str, Any]) -> None:
        self._api.checkpoints.set_metadata(self.uuid, metadata)
        self.metadata = metadata

    def add_metadata(self, metadata: dict[str, Any]) -> None:
        """Merge ``metadata`` into the checkpoint's metadata on the master (top-level keys are
        replaced). The copy in the checkpoint storage is not changed."""
        if not isinstance(metadata, dict):
            raise ValueError(f"metadata: must be a dict, got {type(metadata).__name__}")
        self._push_metadata({**(self.metadata or {}), **metadata})

    def remove_metadata(self, keys: list[str]) -> None:
        """Remove top-level ``keys`` from the checkpoint's metadata on the master."""
        if isinstance(keys, str) or not all(isinstance(k, str) for k in keys):
            raise ValueError(f"keys: must be a list of strings, got {keys!r}")
        self._push_metadata({k: v for k, v in (self.metadata or {}).items() if k not in keys})

    # ---------------------------------------------------------------------------- deletion

    def delete(self) -> None:
        """Delete the checkpoint's files from the storage; the master marks it DELETED.

        Raises:
            APIError: e.g. when the checkpoint is registered as a model version.
        """
        self._api.checkpoints.delete([self.uuid])

    def remove_files(self, globs: list[str]) -> None:
        """Delete the files matching ``globs`` from the storage (``[]`` only refreshes the list
        of files the master keeps)."""
        if isinstance(globs, str) or not all(isinstance(g, str) for g in globs):
            raise ValueError(f"globs: must be a list of strings, got {globs!r}")
        self._api.checkpoints.remove_files([self.uuid], globs)

    # ------------------------------------------------------------------------------- reading

    def describe(self) -> str:
        """A readable summary: state, origin, steps, size, files and metrics."""
        self.reload()
        resources = self.resources or {}
        size = sum(int(v) for v in resources.values() if str(v).isdigit())
        lines = [
            f"Checkpoint {self.uuid}",
            f"  state:           {self.state.name if self.state else 'unknown'}",
            f"  report time:     {self.report_time}",
            f"  task:            {self.task_id}",
            f"  steps completed: {(self.metadata or {}).get('steps_completed')}",
            f"  size:            {size} bytes in {len(resources)} entries",
        ]
        if self.training is not None:
            metrics = self.training.validation_metrics.get("avgMetrics") or {}
            lines += [
                f"  experiment:      {self.training.experiment_id}",
                f"  trial:           {self.training.trial_id}",
                f"  hparams:         {json.dumps(self.training.hparams, sort_keys=True)}",
                f"  validation:      {json.dumps(metrics, sort_keys=True)}",
            ]
        lines.append(f"  metadata:        {json.dumps(self.metadata or {}, sort_keys=True)}")
        lines += [f"    {name}  {resources[name]}" for name in sorted(resources)]
        return "\n".join(lines)

    def get_metrics(self, group: str | None = None) -> Iterable[TrialMetrics]:
        """The metrics reported by the tasks that used this checkpoint for inference.

        A task links itself to the checkpoint with
        ``core_context.experimental.report_task_using_checkpoint(checkpoint)``; its reports are
        yielded trial by trial, in the order of their steps.

        Args:
            group: one metric group ("training", "validation", "inference", ...); ``None`` or
                ``""`` for every group.
        """
        answer = self._api.checkpoints.metrics(
            self.uuid, group=group or None, source_type=INFERENCE_SOURCE
        )
        for report in answer.get("metrics") or []:
            yield TrialMetrics._from_json(report, group or None)

    def get_pachyderm_commit(self) -> str:
        """The Pachyderm commit named in the experiment config's ``integrations``."""
        if self.training is None:
            self.reload()
        config = self.training.experiment_config if self.training else {}
        try:
            return str(config["integrations"]["pachyderm"]["dataset"]["commit"])
        except (KeyError, TypeError):
            raise ValueError(f"checkpoint {self.uuid}: no Pachyderm configuration") from None
