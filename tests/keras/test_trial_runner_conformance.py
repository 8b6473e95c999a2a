"""det-plugin-keras's TFKerasTrialRunner passes the trial-runner conformance suite with the iris
example's TFKerasTrial (``examples/keras``: 120 samples, batches of 16, so 8 batches an epoch).

The suite trains in its own interpreter, so this process imports no TensorFlow.
"""

from __future__ import annotations

from typing import Any

from keras_helpers import ROOT

from determined.testing.trial_runner_suite import TrialRunnerSuite


class TestTFKerasTrialRunner(TrialRunnerSuite):
    entrypoint = "model_def:IrisTrial"
    context_dir = ROOT / "examples" / "keras"
    runner = "determined.keras._trial_runner.TFKerasTrialRunner"
    searcher_metric = "val_categorical_accuracy"
    smaller_is_better = False
    length_unit = "epochs"
    batches_per_unit = 8
    lengths = (1, 2)

    def experiment_config(self) -> dict[str, Any]:
        return {
            "hyperparameters": {
                "learning_rate": 0.01,
                "layer1_dense_size": 8,
                "global_batch_size": 16,
            },
            "scheduling_unit": 4,
            "min_validation_period": {"epochs": 1},
            "min_checkpoint_period": {"epochs": 1},
            "reproducibility": {"experiment_seed": 1},
        }

    def run_environment(self) -> dict[str, str]:
        return {"TF_CPP_MIN_LOG_LEVEL": "2"}
