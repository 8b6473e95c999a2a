"""The small DeepSpeedTrial as a legacy ``entrypoint: model_def:LinTrial`` experiment."""

from __future__ import annotations

import importlib.metadata
import time
from typing import Any

import lintrial

import determined as det
from determined.core import _hooks
from determined.pytorch.deepspeed import _runner

# Until det-plugin-deepspeed is reinstalled with its entry point, register the runner by hand.
if not any(ep.name == "deepspeed" for ep in importlib.metadata.entry_points(group="determined")):
    _hooks.register(_runner, name="deepspeed")


HOLD_LINE = "holding for a pause after batch"


class LinTrial(lintrial.LinTrial):
    """With ``wait_for_pause_at: N`` its first run holds after batch N until the experiment is
    paused (no time limit), so a test pauses it mid-run (every rank polls in step: one broadcast
    per poll)."""

    def train_batch(self, dataloader_iter: Any, epoch_idx: int, batch_idx: int) -> Any:
        out = super().train_batch(dataloader_iter, epoch_idx, batch_idx)
        wait_at = self.hp.get("wait_for_pause_at")
        first_run = (
            det.get_cluster_info() is None or det.get_cluster_info().latest_checkpoint is None
        )
        if wait_at is not None and batch_idx == int(wait_at) and first_run and not self._waited:
            self._waited = True
            preempt = self.context._core.preempt
            print(f"{HOLD_LINE} {batch_idx}", flush=True)  # the test pauses once it reads this
            # Until the pause arrives, however long the test takes to get every trial here on a
            # loaded machine (a bounded hold let an early trial run on past it). Every rank polls
            # equally often: each poll is one broadcast of the chief's answer.
            while not preempt.should_preempt(auto_ack=False):
                time.sleep(0.1)
        return out

    _waited = False
