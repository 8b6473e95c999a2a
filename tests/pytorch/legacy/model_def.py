"""The one-variable trial as a legacy ``entrypoint: model_def:OneVarTrial`` experiment."""

import importlib.metadata
import time

import onevar

from determined.core import _hooks
from determined.pytorch import _runner

# Until det-plugin-pytorch is reinstalled with its entry point, register the trial runner by hand.
if not any(ep.name == "pytorch" for ep in importlib.metadata.entry_points(group="determined")):
    _hooks.register(_runner, name="pytorch")


class OneVarTrial(onevar.OneVarTrial):
    """Sleeps ``slow`` seconds per batch, so a test can pause it mid-run."""

    def train_batch(self, batch, epoch_idx, batch_idx):  # type: ignore[no-untyped-def]
        if self.hp.get("slow"):
            time.sleep(float(self.hp["slow"]))
        return super().train_batch(batch, epoch_idx, batch_idx)
