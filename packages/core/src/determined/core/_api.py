"""``TrialAPI``: the calls a task's contexts make to the master, whoever answers them.

``determined.client.MasterClient`` answers them over HTTP; ``LocalBackend`` answers them in-process
off-cluster. Contexts only ever see this protocol.
"""

from __future__ import annotations

from typing import Any, Protocol


class TrialAPI(Protocol):
    def start_run(self, run_id: int, checkpoint_storage: dict[str, Any] | None) -> int | None: ...

    def report_trial_metrics_batch(self, trial_id: int, reports: list[dict[str, Any]]) -> None: ...

    def report_progress(self, trial_id: int, progress: float) -> None: ...

    def set_runner_status(self, trial_id: int, status: str) -> None: ...

    def report_early_exit(self, trial_id: int, reason: str) -> bool: ...

    def get_best_searcher_validation_metric(self, experiment_id: int) -> float | None: ...

    def set_run_metadata(self, run_id: int, metadata: dict[str, Any]) -> dict[str, Any]: ...

    def get_run_metadata(self, run_id: int) -> dict[str, Any]: ...

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
    ) -> None: ...

    def patch_checkpoint_resources(self, uuid: str, resources: dict[str, int]) -> None: ...

    def get_checkpoint(self, uuid: str) -> dict[str, Any]: ...

    def ack_preemption(self, allocation_id: str) -> None: ...

    def post_custom_webhook(
        self, experiment_id: int, trial_id: int, title: str, description: str, level: str
    ) -> None: ...

    def post_trial_source_info(self, trial_source_info: dict[str, Any]) -> None: ...

    def close(self) -> None: ...
