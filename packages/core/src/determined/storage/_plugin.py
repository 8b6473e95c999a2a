"""det-core's built-in checkpoint-storage plugin: every type ``determined.storage.build`` knows."""

from __future__ import annotations

from typing import Any

from determined.core._markers import hookimpl
from determined.storage._base import StorageManager
from determined.storage._config import STORAGE_TYPES, build


@hookimpl(trylast=True)
def det_checkpoint_storage(config: dict[str, Any]) -> StorageManager | None:
    """Build shared_fs, directory, s3, gcs, azure and fsspec storage; ``None`` for other types."""
    if not isinstance(config, dict) or config.get("type") not in STORAGE_TYPES:
        return None
    return build(config)
