"""Checkpoint garbage collection, run by the master as a ``CHECKPOINT_GC`` task.

``python -m determined.exec.gc_checkpoints`` reads what to do from ``$DET_GC_SPEC`` (JSON, kept out
of the command line because a storage config may hold credentials)::

    {"checkpoint_storage": {...}, "uuids": ["..."], "globs": ["**/*"]}

For each checkpoint it deletes the files matching ``globs`` from the storage (no globs: deletes
nothing and only lists the files) and tells the master what remains (``PATCH
/api/v1/checkpoints``, as the task's user from ``$DET_MASTER`` / ``$DET_USER_TOKEN``); the master
marks a checkpoint with nothing left ``DELETED`` and one that lost some files
``PARTIALLY_DELETED``. Like upstream's ``determined.exec.gc_checkpoints``, it runs where the
storage is reachable from, which need not be the master's machine.

Exit status: 0 when every checkpoint was handled, 1 when one or more failed (the others still were).
"""

from __future__ import annotations

import json
import logging
import os
import sys
from typing import Any

logger = logging.getLogger("determined.exec.gc_checkpoints")

SPEC_ENV = "DET_GC_SPEC"
"""The environment variable holding the task's JSON spec."""


def read_spec(environ: dict[str, str] | os._Environ[str]) -> dict[str, Any]:
    """The spec from the environment, checked.

    Raises:
        ValueError: the variable is missing or does not hold the documented shape.
    """
    raw = environ.get(SPEC_ENV)
    if not raw:
        raise ValueError(f"${SPEC_ENV} is not set")
    spec = json.loads(raw)
    if not isinstance(spec, dict) or not isinstance(spec.get("checkpoint_storage"), dict):
        raise ValueError(f"${SPEC_ENV}: checkpoint_storage must be an object")
    uuids, globs = spec.get("uuids"), spec.get("globs", [])
    if not isinstance(uuids, list) or not all(isinstance(u, str) and u for u in uuids):
        raise ValueError(f"${SPEC_ENV}: uuids must be a list of checkpoint uuids")
    if not isinstance(globs, list) or not all(isinstance(g, str) and g for g in globs):
        raise ValueError(f"${SPEC_ENV}: globs must be a list of glob patterns")
    return spec


def collect(storage: Any, uuid: str, globs: list[str]) -> dict[str, int]:
    """Delete the files of checkpoint ``uuid`` matching ``globs``; returns what remains."""
    from determined.storage import CheckpointNotFound

    try:
        remaining = storage.delete(uuid, globs) if globs else storage.list_files(uuid)
    except CheckpointNotFound:
        remaining = {}
    return {str(k): int(v) for k, v in (remaining or {}).items()}


def main() -> int:
    """Run the spec of ``$DET_GC_SPEC``; returns the exit status."""
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stdout)
    from determined.client import MasterClient, Session
    from determined.core import plugins

    spec = read_spec(os.environ)
    storage = plugins.checkpoint_storage(dict(spec["checkpoint_storage"]))
    globs = list(spec.get("globs") or [])
    client = MasterClient(Session(os.environ["DET_MASTER"], os.environ.get("DET_USER_TOKEN")))
    failed = 0
    for uuid in spec["uuids"]:
        try:
            remaining = collect(storage, uuid, globs)
            client.patch_checkpoint_resources(uuid, remaining)
        except Exception:
            failed += 1
            logger.exception("checkpoint %s: garbage collection failed", uuid)
            continue
        what = f"{len(remaining)} file(s) remain" if remaining else "deleted"
        logger.info("checkpoint %s: %s", uuid, what)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
