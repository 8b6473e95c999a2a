"""``PyTorchCallback``: hooks into the training loop of a PyTorchTrial."""

from __future__ import annotations

from typing import Any


class PyTorchCallback:
    """Override any of these hooks; return them from ``PyTorchTrial.build_callbacks()``.

    Every rank runs every hook, except ``on_checkpoint_save_start`` and ``on_checkpoint_write_end``,
    which run where the checkpoint is written (the chief). State returned by ``state_dict()`` is
    saved in checkpoints under the callback's name and handed back to ``load_state_dict()``; it
    must be loadable by ``torch.load(weights_only=True)`` (tensors, numbers, strings, lists, dicts).
    """

    def on_trial_startup(self, first_batch_idx: int, checkpoint_uuid: str | None) -> None:
        """Before anything else, with the batch training starts at and the checkpoint it resumes."""

    def on_trial_shutdown(self) -> None:
        """When the trial ends, however it ends (also after errors)."""

    def on_training_start(self) -> None:
        """After the checkpoint (if any) was restored, before the first batch."""

    def on_training_epoch_start(self, epoch_idx: int) -> None:
        """Before the first batch of epoch ``epoch_idx`` (0-based)."""

    def on_training_epoch_end(self, epoch_idx: int) -> None:
        """After the last batch of epoch ``epoch_idx``."""

    def on_training_workload_end(
        self, avg_metrics: dict[str, Any], batch_metrics: list[dict[str, Any]]
    ) -> None:
        """After each reported stretch of training, with its averaged and per-batch metrics."""

    def on_validation_start(self) -> None:
        """Before validation."""

    def on_validation_epoch_start(self) -> None:
        """Before the first validation batch (``evaluate_batch`` trials only)."""

    def on_validation_epoch_end(self, outputs: list[Any]) -> None:
        """After the last validation batch, with this rank's per-batch metric dicts."""

    def on_validation_end(self, metrics: dict[str, Any]) -> None:
        """After validation, with the reduced metrics (on every rank)."""

    def on_checkpoint_load_start(self, checkpoint: dict[str, Any]) -> None:
        """Before a checkpoint's state is restored, with the loaded ``state_dict.pth`` dict."""

    def on_checkpoint_save_start(self, checkpoint: dict[str, Any]) -> None:
        """Before ``state_dict.pth`` is written; may add entries to ``checkpoint``."""

    def on_checkpoint_end(self, checkpoint_dir: str) -> None:
        """Deprecated: use :meth:`on_checkpoint_write_end`."""

    def on_checkpoint_write_end(self, checkpoint_dir: str) -> None:
        """After the checkpoint files were written to ``checkpoint_dir`` (chief only)."""

    def on_checkpoint_upload_end(self, uuid: str) -> None:
        """After the checkpoint was stored and reported (every rank), with its storage id."""

    def state_dict(self) -> dict[str, Any]:
        """This callback's state to save in checkpoints."""
        return {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
