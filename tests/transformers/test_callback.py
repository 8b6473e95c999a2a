"""DetCallback off-cluster: a Hugging Face Trainer on a tiny BERT built from a config trains under
``det.core.init()`` with no master; its metrics are logged and its checkpoints stored locally. Also
the searcher-length checks and the metric handling, which need no training."""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import pathlib
import subprocess
import sys
from types import ModuleType

import pytest

import determined as det
from determined.transformers._searcher_rungs import check_searcher_length

CONTEXT = pathlib.Path(__file__).resolve().parent / "context"


def _train_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("hf_det_train", CONTEXT / "train.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_off_cluster_trains_reports_metrics_and_stores_checkpoints(
    tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture
) -> None:
    assert det.get_cluster_info() is None
    train = _train_module()
    storage = tmp_path / "checkpoints"
    caplog.set_level(logging.INFO, logger="determined.core")
    with det.core.init(checkpoint_storage=str(storage)) as core_context:
        train.main(core_context, {"max_steps": 8}, str(tmp_path / "hf-output"))

    logged = [r.getMessage() for r in caplog.records]
    for step in (2, 4, 6, 8):
        assert any(m.startswith(f"training metrics at step {step}:") for m in logged), logged
    validations = [m for m in logged if m.startswith("validation metrics at step")]
    assert [m.split(":")[0] for m in validations] == [
        "validation metrics at step 4",
        "validation metrics at step 8",
    ]
    assert "'eval_loss'" in validations[0] and "'batches': 4" in validations[0]
    assert "'epochs'" in validations[0] and "'epoch'" not in validations[0]
    assert "_runtime" not in " ".join(validations)

    stored = {}
    for checkpoint in storage.iterdir():
        metadata = json.loads((checkpoint / "metadata.json").read_text())
        stored[metadata["steps_completed"]] = checkpoint
        assert "trial_id" not in metadata
    assert sorted(stored) == [4, 8]
    for steps, checkpoint in stored.items():
        # only the checkpoint-N directory the Trainer wrote at that step, with the user data
        assert sorted(p.name for p in checkpoint.iterdir()) == [
            f"checkpoint-{steps}",
            "metadata.json",
        ]
        files = {p.name for p in (checkpoint / f"checkpoint-{steps}").iterdir()}
        assert {"model.safetensors", "optimizer.pt", "trainer_state.json", "my_data.json"} <= files
        user_data = json.loads((checkpoint / f"checkpoint-{steps}" / "my_data.json").read_text())
        assert user_data == {"lr": 0.01}


def test_logs_are_filtered_into_new_dicts(tmp_path: pathlib.Path) -> None:
    import transformers

    from determined.transformers import DetCallback

    args = transformers.TrainingArguments(output_dir=str(tmp_path), report_to="none", use_cpu=True)
    filters = ["loss"]
    with det.core.init(checkpoint_storage=str(tmp_path / "ckpt")) as core_context:
        callback = DetCallback(core_context, args, filter_metrics=filters)
        logs = {"eval_loss": 0.5, "eval_runtime": 1.0, "eval_accuracy": 0.9, "epoch": 1.0}
        metrics, kind = callback._get_metrics(logs)
    assert kind == "eval_"
    assert metrics == {"eval_loss": 0.5}
    assert logs == {"eval_loss": 0.5, "eval_runtime": 1.0, "eval_accuracy": 0.9, "epoch": 1.0}
    assert filters == ["loss"]


@pytest.mark.parametrize(
    ("searcher", "max_steps", "epochs", "unit"),
    [
        ({"name": "single", "metric": "eval_loss"}, 16, 3.0, None),
        (
            {"name": "single", "metric": "eval_loss", "max_length": {"batches": 16}},
            16,
            3.0,
            "batches",
        ),
        ({"name": "single", "metric": "eval_loss", "max_length": {"epochs": 2}}, -1, 2.0, "epochs"),
        (
            {
                "name": "adaptive_asha",
                "metric": "eval_loss",
                "time_metric": "batches",
                "max_time": 16,
            },
            16,
            3.0,
            "batches",
        ),
        (
            {
                "name": "async_halving",
                "metric": "eval_loss",
                "time_metric": "epochs",
                "max_time": 4,
            },
            -1,
            4.0,
            "epochs",
        ),
        # a time metric of the training code's own: nothing to compare, no rungs to follow
        (
            {
                "name": "adaptive_asha",
                "metric": "eval_loss",
                "time_metric": "tokens",
                "max_time": 9,
            },
            16,
            3.0,
            None,
        ),
    ],
)
def test_searcher_length_matches_the_trainers(
    searcher: dict, max_steps: int, epochs: float, unit: str | None
) -> None:
    assert check_searcher_length(searcher, max_steps, epochs) == unit


@pytest.mark.parametrize(
    ("searcher", "message"),
    [
        ({"name": "single", "max_length": 16}, "no unit"),
        ({"name": "single", "max_length": {"batches": 8}}, r"batches=16.*batches=8"),
        ({"name": "single", "max_length": {"epochs": 16}}, r"batches=16.*epochs=16"),
        ({"name": "adaptive_asha", "time_metric": "batches", "max_time": 32}, "max_time"),
    ],
)
def test_searcher_length_mismatch_is_an_error(searcher: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_searcher_length(searcher, 16, 3.0)


def test_example_trains_off_cluster(tmp_path: pathlib.Path) -> None:
    """examples/transformers/train.py as a user runs it: ``python train.py``, no master."""
    example = pathlib.Path(__file__).resolve().parents[2] / "examples" / "transformers" / "train.py"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DET_")}
    env["XDG_DATA_HOME"] = str(tmp_path / "data")  # det's default local checkpoint storage
    result = subprocess.run(
        [sys.executable, str(example), "--max-steps", "4"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    # the end of training forces an evaluation and a checkpoint of the last step
    assert "validation metrics at step 4:" in result.stdout, result.stdout
    (metadata,) = (tmp_path / "data").rglob("metadata.json")
    assert json.loads(metadata.read_text())["steps_completed"] == 4
    assert (metadata.parent / "checkpoint-4" / "my_data.json").exists()
