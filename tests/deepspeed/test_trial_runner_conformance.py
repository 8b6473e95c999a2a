"""det-plugin-deepspeed's DeepSpeedTrialRunner passes the trial-runner conformance suite with the
small regression trial of these tests (``lintrial.LinTrial``: ZeRO stage 2 on CPU, AdamW)."""

from __future__ import annotations

import os
import pathlib
from typing import Any

import lintrial

from determined.testing.trial_runner_suite import TrialRunnerSuite

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]


class TestDeepSpeedTrialRunner(TrialRunnerSuite):
    entrypoint = "lintrial:LinTrial"
    context_dir = HERE
    runner = "determined.pytorch.deepspeed._runner.DeepSpeedTrialRunner"
    searcher_metric = "val_loss"
    lengths = (4, 8)

    def experiment_config(self) -> dict[str, Any]:
        return {
            "hyperparameters": dict(lintrial.HPARAMS),
            "scheduling_unit": 2,
            "min_validation_period": {"batches": 4},
            "min_checkpoint_period": {"batches": 4},
            "reproducibility": {"experiment_seed": 7},
        }

    def run_environment(self) -> dict[str, str]:
        # DeepSpeed's one-time op builds, if any, stay in the work tree's cache (see conftest).
        return {
            "TORCH_EXTENSIONS_DIR": os.environ.get(
                "TORCH_EXTENSIONS_DIR", str(ROOT / ".cache" / "torch_extensions")
            )
        }
