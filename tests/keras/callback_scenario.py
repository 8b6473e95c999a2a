"""DeterminedCallback off-cluster, end to end, in one process (TensorFlow imports are slow).

Run as ``python callback_scenario.py WORKDIR`` under any Keras: Keras 3 with ``KERAS_BACKEND``
tensorflow or torch, tf.keras 2.15 in the legacy venv, or a venv holding only det-core and
det-plugin-keras. It trains a tiny classifier on synthetic data through five fits that share one
checkpoint directory, asserts what it sees, and prints ``ok <keras version> <backend>``:

A. a fresh run (3 epochs, a checkpoint each epoch, TensorBoard);
B. resume A with the same continue_id: fit continues at epoch 3 with A's weights, optimizer state
   and batch count;
C. warm start from A with a new continue_id: epoch 0, batch 0, A's weights;
D. SIGTERM in the middle of an epoch: training stops within one batch and checkpoints;
E. resume D: the interrupted epoch runs again from its start, the batch count goes on from D's.
"""

from __future__ import annotations

import json
import os
import pathlib
import signal
import sys
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np

import determined as det
from determined.keras._compat import KERAS_MAJOR, backend_name, keras

BATCH = 8
SAMPLES = 64
STEPS_PER_EPOCH = SAMPLES // BATCH


def data(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(SAMPLES, 4)).astype("float32")
    labels = (x[:, 0] > 0).astype("int64") + (x[:, 1] > 0.5).astype("int64")
    return x, np.eye(3, dtype="float32")[labels]


def build_model() -> Any:
    model = keras.Sequential([keras.Input(shape=(4,)), keras.layers.Dense(3, activation="softmax")])
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate=0.05),
        loss="categorical_crossentropy",
        metrics=["categorical_accuracy"],
    )
    return model


def weights(model: Any) -> list[np.ndarray]:
    return [np.array(w) for w in model.get_weights()]


def same(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    return len(a) == len(b) and all(np.allclose(x, y) for x, y in zip(a, b, strict=True))


def iterations(model: Any) -> int:
    return int(np.asarray(model.optimizer.iterations))


class Recorder(keras.callbacks.Callback):  # type: ignore[misc]
    """What fit did: epochs begun, the weights at the first batch, an optional SIGTERM."""

    def __init__(self, sigterm_at_step: int | None = None) -> None:
        super().__init__()
        self.epochs: list[int] = []
        self.first_weights: list[np.ndarray] | None = None
        self.first_iterations: int | None = None
        self.steps = 0
        self.sigterm_at_step = sigterm_at_step
        self.weights_at_sigterm: list[np.ndarray] | None = None

    def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
        self.epochs.append(epoch)

    def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
        if self.first_weights is None:
            self.first_weights = weights(self.model)
            self.first_iterations = iterations(self.model)

    def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
        self.steps += 1
        if self.steps == self.sigterm_at_step:
            self.weights_at_sigterm = weights(self.model)
            os.kill(os.getpid(), signal.SIGTERM)


def run(
    storage: pathlib.Path,
    *,
    epochs: int,
    continue_id: str,
    checkpoint: str | None,
    recorder: Recorder,
    tensorboard: bool = False,
    **callback_args: Any,
) -> tuple[Any, dict[str, list[tuple[int, dict[str, Any]]]], pathlib.Path]:
    """One fit with a fresh core context; returns the model, the reported metrics and the TB dir."""
    reports: dict[str, list[tuple[int, dict[str, Any]]]] = {"training": [], "validation": []}
    with det.core.init(checkpoint_storage=str(storage)) as core_context:
        train = core_context.train
        real_training, real_validation = (
            train.report_training_metrics,
            train.report_validation_metrics,
        )

        def training(steps_completed: int, metrics: dict[str, Any], *a: Any) -> None:
            reports["training"].append((steps_completed, dict(metrics)))
            real_training(steps_completed, metrics, *a)

        def validation(steps_completed: int, metrics: dict[str, Any]) -> None:
            reports["validation"].append((steps_completed, dict(metrics)))
            real_validation(steps_completed, metrics)

        train.report_training_metrics = training  # record, then really report
        train.report_validation_metrics = validation
        model = build_model()
        # The recorder goes first: its SIGTERM lands before the DeterminedCallback's check.
        callbacks = [
            recorder,
            det.keras.DeterminedCallback(
                core_context, checkpoint=checkpoint, continue_id=continue_id, **callback_args
            ),
        ]
        if tensorboard:
            callbacks.append(det.keras.TensorBoard(core_context, histogram_freq=1))
        x, y = data(0)
        model.fit(
            x,
            y,
            batch_size=BATCH,
            epochs=epochs,
            validation_data=data(1),
            callbacks=callbacks,
            verbose=0,
            shuffle=False,
        )
        tb_dir = train.get_tensorboard_path()
    return model, reports, tb_dir


def checkpoints(storage: pathlib.Path) -> dict[int, pathlib.Path]:
    """Checkpoint directories by steps_completed."""
    found = {}
    for metadata in storage.glob("*/metadata.json"):
        found[json.loads(metadata.read_text())["steps_completed"]] = metadata.parent
    return found


def check_arguments() -> None:
    with det.core.init(checkpoint_storage=str(STORAGE / "args")) as core_context:
        for kwargs, message in [
            ({"train_metrics_report_period": 0}, "train_metrics_report_period"),
            ({"train_metrics_report_period": "batch"}, "train_metrics_report_period"),
            ({"checkpoint_epochs": -1}, "checkpoint_epochs"),
            ({"preemption_check_period": 0}, "preemption_check_period"),
        ]:
            try:
                det.keras.DeterminedCallback(core_context, None, "x", **kwargs)
            except (TypeError, ValueError) as exc:
                assert message in str(exc), exc
            else:
                raise AssertionError(f"{kwargs} was accepted")
        try:
            det.keras.DeterminedCallback(object(), None, "x")  # type: ignore[arg-type]
        except TypeError as exc:
            assert "det.core.init()" in str(exc), exc
        else:
            raise AssertionError("a non-context was accepted")


def main() -> None:
    check_arguments()
    storage = STORAGE / "ckpt"

    # A: fresh run.
    rec_a = Recorder()
    model_a, rep_a, tb_dir = run(
        storage, epochs=3, continue_id="run-1", checkpoint=None, recorder=rec_a, tensorboard=True
    )
    assert rec_a.epochs == [0, 1, 2], rec_a.epochs
    assert [s for s, _ in rep_a["training"]] == [8, 16, 24], rep_a["training"]
    steps, metrics = rep_a["validation"][-1]
    assert steps == 24, rep_a["validation"]
    for name in ("val_loss", "val_categorical_accuracy", "loss", "categorical_accuracy"):
        assert name in metrics, metrics
    assert metrics["epochs"] == 3 and metrics["batches"] == 24, metrics
    assert all(not k.startswith("val_") for k in rep_a["training"][0][1]), rep_a["training"]
    assert rep_a["training"][0][1]["epochs"] == 1, rep_a["training"]
    saved = checkpoints(storage)
    assert sorted(saved) == [8, 16, 24], sorted(saved)
    state = json.loads((saved[24] / "callback_state.json").read_text())
    assert state["epoch"] == 2 and state["continue_id"] == "run-1", state
    assert (saved[24] / "model_checkpoint.weights.h5").is_file()
    events = list(tb_dir.rglob("*tfevents*"))
    assert events, f"no TensorBoard event files under {tb_dir}"
    final_a, iterations_a = weights(model_a), iterations(model_a)
    assert iterations_a == 24, iterations_a
    latest_a = saved[24].name

    # B: resume with the same continue_id.
    rec_b = Recorder()
    _, rep_b, _ = run(storage, epochs=5, continue_id="run-1", checkpoint=latest_a, recorder=rec_b)
    assert rec_b.epochs == [3, 4], rec_b.epochs
    assert rec_b.first_weights is not None and same(rec_b.first_weights, final_a)
    assert rec_b.first_iterations == 24, rec_b.first_iterations  # optimizer state restored
    assert [s for s, _ in rep_b["training"]] == [32, 40], rep_b["training"]
    assert rep_b["training"][0][1]["epochs"] == 4, rep_b["training"]
    assert 40 in checkpoints(storage)

    # C: warm start with a new continue_id.
    rec_c = Recorder()
    _, rep_c, _ = run(storage, epochs=2, continue_id="run-2", checkpoint=latest_a, recorder=rec_c)
    assert rec_c.epochs == [0, 1], rec_c.epochs
    assert rec_c.first_weights is not None and same(rec_c.first_weights, final_a)
    assert [s for s, _ in rep_c["training"]] == [8, 16], rep_c["training"]

    # D: preempted in the middle of epoch 1 (the 3rd of its 8 batches), batch-level reports.
    storage_d = STORAGE / "ckpt-d"
    rec_d = Recorder(sigterm_at_step=11)
    _, rep_d, _ = run(
        storage_d,
        epochs=4,
        continue_id="run-3",
        checkpoint=None,
        recorder=rec_d,
        train_metrics_report_period=4,
        checkpoint_epochs=0,
    )
    assert rec_d.epochs == [0, 1], rec_d.epochs
    assert rec_d.steps == 11, f"training went on for {rec_d.steps - 11} batches after SIGTERM"
    assert [s for s, _ in rep_d["training"]] == [4, 8], rep_d["training"]
    assert [s for s, _ in rep_d["validation"]] == [8], rep_d["validation"]
    saved_d = checkpoints(storage_d)
    assert sorted(saved_d) == [11], sorted(saved_d)
    state = json.loads((saved_d[11] / "callback_state.json").read_text())
    assert state["epoch"] == 0 and state["steps_completed"] == 11, state

    # E: resume D.
    rec_e = Recorder()
    _, rep_e, _ = run(
        storage_d, epochs=4, continue_id="run-3", checkpoint=saved_d[11].name, recorder=rec_e
    )
    assert rec_e.epochs == [1, 2, 3], rec_e.epochs
    assert rec_e.first_iterations == 11, rec_e.first_iterations
    assert rec_d.weights_at_sigterm is not None and rec_e.first_weights is not None
    assert same(rec_e.first_weights, rec_d.weights_at_sigterm)
    assert [s for s, _ in rep_e["training"]] == [19, 27, 35], rep_e["training"]
    assert [s for s, _ in rep_e["validation"]] == [19, 27, 35], rep_e["validation"]
    print("ok", keras.__version__, backend_name(), f"keras{KERAS_MAJOR}")


if __name__ == "__main__":
    STORAGE = pathlib.Path(sys.argv[1])
    main()
