"""det-plugin-estimator's EstimatorTrialRunner passes the trial-runner conformance suite with the
example's EstimatorTrial (``examples/estimator``: a small classifier of scikit-learn's breast-cancer
data). Collected in the legacy venv only (see conftest.py)."""

from __future__ import annotations

import pathlib
import sys
from typing import Any

from determined.testing.trial_runner_suite import TrialRunnerSuite

EXAMPLE = pathlib.Path(__file__).resolve().parents[3] / "examples" / "estimator"


class TestEstimatorTrialRunner(TrialRunnerSuite):
    entrypoint = "model_def:CancerTrial"
    context_dir = EXAMPLE
    runner = "determined.estimator._runner.EstimatorTrialRunner"
    searcher_metric = "accuracy"
    smaller_is_better = False
    lengths = (4, 8)
    python = sys.executable  # this (legacy) venv's interpreter: tf.estimator lives here

    def experiment_config(self) -> dict[str, Any]:
        return {
            "hyperparameters": {"global_batch_size": 32, "learning_rate": 0.1, "hidden": 16},
            "scheduling_unit": 2,
            "min_validation_period": {"batches": 4},
            "min_checkpoint_period": {"batches": 4},
            "reproducibility": {"experiment_seed": 3},
        }

    def run_environment(self) -> dict[str, str]:
        return {"TF_CPP_MIN_LOG_LEVEL": "2"}
