"""det-plugin-pytorch's PyTorchTrialRunner passes the trial-runner conformance suite with the
one-variable trial (``onevar.OneVarTrial``: one weight, a dataset of ones)."""

from __future__ import annotations

import pathlib
from typing import Any

from determined.testing.trial_runner_suite import TrialRunnerSuite


class TestPyTorchTrialRunner(TrialRunnerSuite):
    entrypoint = "onevar:OneVarTrial"
    context_dir = pathlib.Path(__file__).resolve().parent
    runner = "determined.pytorch._runner.PyTorchTrialRunner"
    searcher_metric = "val_loss"
    lengths = (4, 8)

    def experiment_config(self) -> dict[str, Any]:
        return {
            "hyperparameters": {"global_batch_size": 4, "lr": 0.1, "dataset_len": 16},
            "scheduling_unit": 2,
            "min_validation_period": {"batches": 4},
            "min_checkpoint_period": {"batches": 4},
            "reproducibility": {"experiment_seed": 1},
        }
