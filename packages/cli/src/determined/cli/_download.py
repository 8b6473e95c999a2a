"""Downloading a checkpoint: straight from its storage, or through the master as a tarball.

Modes are upstream's: ``direct`` reads the checkpoint storage named in the experiment config with
this machine's credentials, ``master`` asks the master for ``GET /checkpoints/{uuid}`` (a tar.gz),
``auto`` tries direct first and falls back to the master when the storage is out of reach.
"""

from __future__ import annotations

import json
import pathlib
from typing import Any

from determined import client
from determined.cli._errors import CliError

MODES = ("auto", "direct", "master")
DOWNLOADABLE = ("STATE_COMPLETED", "STATE_PARTIALLY_DELETED")


def _direct(checkpoint: dict[str, Any], dest: pathlib.Path) -> None:
    from determined import storage

    training = checkpoint.get("training") or {}
    config = (training.get("experimentConfig") or {}).get("checkpoint_storage")
    if not isinstance(config, dict):
        raise FileNotFoundError("the checkpoint's storage configuration is unknown")
    manager = storage.build(config)
    manager.download(str(checkpoint["uuid"]), dest)


def _via_master(session: client.Session, uuid: str, dest: pathlib.Path) -> None:
    try:
        client.CheckpointsClient(session).download(uuid, dest)
    except client.APIError as exc:
        raise CliError(
            f"downloading checkpoint {uuid} through the master failed: {exc.message}"
        ) from None


def download_checkpoint(
    session: client.Session,
    checkpoint: dict[str, Any],
    path: str | None = None,
    mode: str = "auto",
) -> pathlib.Path:
    """Download ``checkpoint`` (the master's JSON of it) to ``path`` (``checkpoints/<uuid>``).

    A directory that already holds a ``metadata.json`` is taken as downloaded. ``metadata.json`` is
    written from the master's record when the checkpoint files lack it.

    Raises:
        CliError: the checkpoint is not downloadable, or neither mode could reach its files.
    """
    uuid = str(checkpoint["uuid"])
    state = checkpoint.get("state")
    if state not in DOWNLOADABLE:
        raise CliError(
            f"checkpoint {uuid} is {str(state).replace('STATE_', '')}: only COMPLETED or "
            "PARTIALLY_DELETED checkpoints can be downloaded"
        )
    dest = pathlib.Path(path) if path else pathlib.Path("checkpoints", uuid)
    if not (dest / "metadata.json").exists():
        if mode == "direct":
            try:
                _direct(checkpoint, dest)
            except (FileNotFoundError, ImportError, ValueError, OSError) as exc:
                raise CliError(f"direct download of checkpoint {uuid} failed: {exc}") from None
        elif mode == "master":
            _via_master(session, uuid, dest)
        else:
            try:
                _direct(checkpoint, dest)
            except (FileNotFoundError, ImportError, ValueError, OSError):
                _via_master(session, uuid, dest)
    metadata = dest / "metadata.json"
    if not metadata.exists():
        metadata.write_text(json.dumps(checkpoint.get("metadata") or {}, indent=2, sort_keys=True))
    return dest
