"""``det.experimental.create(..., mode=Mode.LOCAL)`` with no master: the PyTorch and Keras example
trials train in the calling process through their plugins' trial runners, and the script goes on."""

from __future__ import annotations

import pathlib

import pytest
from native_helpers import example_config, example_context, local_checkpoints, run_driver

pytestmark = pytest.mark.slow


def test_pytorch_trial_trains_validates_and_checkpoints_locally(tmp_path: pathlib.Path) -> None:
    config = example_config(
        "pytorch",
        "const.yaml",
        searcher={"name": "single", "metric": "validation_loss", "max_length": {"batches": 40}},
        min_validation_period={"batches": 20},
        scheduling_unit=10,
    )
    result = run_driver(
        tmp_path, example_context("pytorch", tmp_path), "model_def:DigitsTrial", config, "local"
    )
    assert result.stdout.strip().endswith("AFTER CREATE"), result.stdout
    assert "training DigitsTrial locally" in result.stderr
    assert "validation metrics at step 20" in result.stderr
    assert "validation metrics at step 40" in result.stderr
    assert local_checkpoints(tmp_path)[-1] == 40


def test_test_mode_trains_one_batch(tmp_path: pathlib.Path) -> None:
    config = example_config("pytorch", "adaptive.yaml")  # ASHA, max_time 400: test mode ignores it
    result = run_driver(
        tmp_path,
        example_context("pytorch", tmp_path),
        "model_def:DigitsTrial",
        config,
        "local",
        "test",
    )
    assert "validation metrics at step 1:" in result.stderr, result.stderr[-3000:]
    assert "the test run passed" in result.stderr
    assert local_checkpoints(tmp_path) == [1]


def test_keras_trial_trains_locally(tmp_path: pathlib.Path) -> None:
    config = example_config(
        "keras",
        "trial.yaml",
        searcher={
            "name": "single",
            "metric": "val_categorical_accuracy",
            "smaller_is_better": False,
            "max_length": {"epochs": 2},
        },
        min_validation_period={"epochs": 1},
    )
    result = run_driver(
        tmp_path, example_context("keras", tmp_path), "model_def:IrisTrial", config, "local"
    )
    assert result.stdout.strip().endswith("AFTER CREATE"), result.stdout
    assert result.stderr.count("val_categorical_accuracy") >= 2, result.stderr[-3000:]
    assert local_checkpoints(tmp_path), "no checkpoint in the local storage"
