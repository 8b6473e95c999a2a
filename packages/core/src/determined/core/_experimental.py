"""ExperimentalCoreContext: link this task to the checkpoints and model versions it uses."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from determined.core._api import TrialAPI


class ExperimentalCoreContext:
    """Record which checkpoint or model version this trial used for inference (metrics lineage)."""

    def __init__(self, backend: TrialAPI, trial_id: int | None) -> None:
        self._backend = backend
        self._trial_id = trial_id

    def report_task_using_checkpoint(self, checkpoint: Any) -> None:
        """Note that this task used ``checkpoint`` (an SDK Checkpoint, or its UUID)."""
        uuid = getattr(checkpoint, "uuid", checkpoint)
        self._post({"checkpointUuid": str(uuid)})

    def report_task_using_model_version(self, model_version: Any) -> None:
        """Note that this task used ``model_version`` (an SDK ModelVersion)."""
        checkpoint = getattr(model_version, "checkpoint", None)
        info = {
            "checkpointUuid": str(getattr(checkpoint, "uuid", "")),
            "modelId": getattr(model_version, "model_id", None),
            "modelVersion": getattr(model_version, "model_version", None),
        }
        self._post({k: v for k, v in info.items() if v is not None})

    def _post(self, info: dict[str, Any]) -> None:
        if self._trial_id is None:
            return
        info["trialId"] = self._trial_id
        info["trialSourceInfoType"] = "TRIAL_SOURCE_INFO_TYPE_INFERENCE"
        self._backend.post_trial_source_info(info)
