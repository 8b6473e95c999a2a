"""Checkpoints: the resource client for ``/api/v1/checkpoints/...``."""

from __future__ import annotations

import pathlib
import tarfile
import tempfile
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from determined.client import _routes as r
from determined.client._session import Session


class CheckpointsClient:
    """One method per checkpoint endpoint the SDK and the CLI call; each returns the master's JSON
    answer (reporting a new checkpoint is the task process's :class:`~determined.client.MasterClient`)."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def get(self, uuid: str) -> dict[str, Any]:
        """One checkpoint (``checkpoint``)."""
        return r.call(self.session, r.CHECKPOINT_GET, uuid=uuid)

    def metrics(
        self, uuid: str, *, group: str | None = None, source_type: str | None = None
    ) -> dict[str, Any]:
        """The reports of the trials that used the checkpoint (``metrics``); ``group`` keeps one
        metric group, ``source_type`` one ``TRIAL_SOURCE_INFO_TYPE_*``."""
        params = {"metricGroup": group, "trialSourceInfoType": source_type}
        return r.call(self.session, r.CHECKPOINT_METRICS, params=params, uuid=uuid)

    def download(
        self,
        uuid: str,
        dest: str | pathlib.Path,
        *,
        on_chunk: Callable[[int], None] | None = None,
    ) -> None:
        """Fetch the checkpoint's files through the master (a tar.gz) and unpack them into ``dest``.

        ``on_chunk`` gets the running byte count as the archive arrives.

        Raises:
            APIError: the master could not serve them (e.g. its storage is unreachable from it).
        """
        with tempfile.TemporaryFile() as spool:
            r.download(
                self.session,
                r.CHECKPOINT_FILES,
                spool,
                accept="application/gzip",
                on_chunk=on_chunk,
                uuid=uuid,
            )
            spool.seek(0)
            target = pathlib.Path(dest)
            target.mkdir(parents=True, exist_ok=True)
            with tarfile.open(fileobj=spool, mode="r:*") as archive:
                archive.extractall(target, filter="data")

    def set_metadata(self, uuid: str, metadata: Mapping[str, Any]) -> dict[str, Any]:
        """Replace the checkpoint's user metadata on the master (the stored copy stays)."""
        body = {
            "checkpoint": {
                "uuid": uuid,
                "metadata": dict(metadata),
                "resources": {},
                "training": {},
                "state": "STATE_UNSPECIFIED",
            }
        }
        return r.call(self.session, r.CHECKPOINT_METADATA, body=body, uuid=uuid)

    def delete(self, uuids: Sequence[str]) -> dict[str, Any]:
        """Delete the checkpoints' files; the master marks them DELETED."""
        return r.call(self.session, r.CHECKPOINTS_DELETE, body={"checkpointUuids": list(uuids)})

    def remove_files(self, uuids: Sequence[str], globs: Sequence[str]) -> dict[str, Any]:
        """Delete the files matching ``globs`` from each checkpoint (``[]`` refreshes the list)."""
        body = {"checkpointUuids": list(uuids), "checkpointGlobs": list(globs)}
        return r.call(self.session, r.CHECKPOINTS_REMOVE_FILES, body=body)
