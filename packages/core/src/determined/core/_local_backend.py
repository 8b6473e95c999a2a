"""The master stand-in for off-cluster runs: the same calls as ``MasterClient``, answered locally.

``core.init()`` gives every context a backend: a ``MasterClient`` on-cluster, this class off-cluster.
The contexts are one implementation either way, so local behaviour cannot drift from cluster behaviour:
metrics and progress are logged, checkpoint metadata is read back from storage, run metadata is kept in
memory, and there is no master-side preemption (SIGTERM still works, see ``_preempt_sources``).
"""

from __future__ import annotations

import json
import logging
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from determined.storage import StorageManager

logger = logging.getLogger("determined.core")


class LocalBackend:
    """Answers a task's master calls in-process.

    Args:
        storage: where checkpoints go; used to read a checkpoint's ``metadata.json`` back.
    """

    def __init__(self, storage: StorageManager | None = None) -> None:
        self.storage = storage
        self._run_metadata: dict[str, Any] = {}
        self._checkpoint_metadata: dict[str, dict[str, Any]] = {}
        self._early_exit: str | None = None
        self._lock = threading.Lock()

    def start_run(self, run_id: int, checkpoint_storage: dict[str, Any] | None) -> int | None:
        return None

    def report_trial_metrics_batch(self, trial_id: int, reports: list[dict[str, Any]]) -> None:
        for report in reports:
            inner = report["metrics"]
            logger.info(
                "%s metrics at step %s: %s",
                report["group"],
                inner.get("stepsCompleted"),
                inner["metrics"]["avgMetrics"],
            )

    def report_progress(self, trial_id: int, progress: float) -> None:
        logger.info("progress: %.1f%%", progress * 100)

    def set_runner_status(self, trial_id: int, status: str) -> None:
        logger.info("status: %s", status)

    def report_early_exit(self, trial_id: int, reason: str) -> bool:
        with self._lock:
            if self._early_exit is not None:
                return False
            self._early_exit = reason
        logger.info("early exit: %s", reason)
        return True

    def get_best_searcher_validation_metric(self, experiment_id: int) -> float | None:
        return None

    def set_run_metadata(self, run_id: int, metadata: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self._run_metadata = json.loads(json.dumps(metadata))
            return dict(self._run_metadata)

    def get_run_metadata(self, run_id: int) -> dict[str, Any]:
        with self._lock:
            return dict(self._run_metadata)

    def report_checkpoint(
        self,
        uuid: str,
        *,
        task_id: str,
        allocation_id: str | None,
        resources: dict[str, int],
        metadata: dict[str, Any],
        storage_id: int | None = None,
        report_time: str | None = None,
    ) -> None:
        with self._lock:
            self._checkpoint_metadata[uuid] = dict(metadata)
        size = sum(resources.values())
        logger.info("checkpoint %s saved (%d files, %d bytes)", uuid, len(resources), size)

    def patch_checkpoint_resources(self, uuid: str, resources: dict[str, int]) -> None:
        logger.info("checkpoint %s now has %d files", uuid, len(resources))

    def get_checkpoint(self, uuid: str) -> dict[str, Any]:
        with self._lock:
            known = self._checkpoint_metadata.get(uuid)
        if known is not None:
            return {"uuid": uuid, "metadata": dict(known)}
        if self.storage is None:
            return {"uuid": uuid, "metadata": {}}
        with self.storage.restore_path(uuid, selector=lambda path: path == "metadata.json") as path:
            metadata_file = path / "metadata.json"
            metadata = json.loads(metadata_file.read_text()) if metadata_file.exists() else {}
        return {"uuid": uuid, "metadata": metadata}

    def ack_preemption(self, allocation_id: str) -> None:
        logger.info("preemption acknowledged")

    def post_custom_webhook(
        self, experiment_id: int, trial_id: int, title: str, description: str, level: str
    ) -> None:
        logger.info("alert (%s): %s %s", level, title, description)

    def post_trial_source_info(self, trial_source_info: dict[str, Any]) -> None:
        logger.debug("trial source info: %s", trial_source_info)

    def close(self) -> None:
        pass
