"""Checkpoint storage: where ``<storage_id>/<files>`` of each checkpoint live.

``build(config)`` turns an experiment's ``checkpoint_storage`` section (``shared_fs``, ``directory``,
``s3``, ``gcs``, ``azure`` or ``fsspec``) into a ``StorageManager``; ``from_string`` accepts the
shortcuts ``/path``, ``file://``, ``s3://bucket/prefix``, ``gs://...`` and any fsspec URL. Every
backend is one ``FsspecStorageManager`` over an fsspec filesystem.
"""

from __future__ import annotations

from determined.storage._base import CheckpointNotFound, Paths, Selector, StorageManager
from determined.storage._config import STORAGE_TYPES, build, from_string, to_config
from determined.storage._fsspec import FsspecStorageManager

__all__ = [
    "STORAGE_TYPES",
    "CheckpointNotFound",
    "FsspecStorageManager",
    "Paths",
    "Selector",
    "StorageManager",
    "build",
    "from_string",
    "to_config",
]
