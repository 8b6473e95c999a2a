"""Tiny TFKerasTrials using the names Determined 0.38 deprecated, for ``legacy_names_scenario.py``.

They train in the scenario's own process (``determined.testing.trial_runs.run_trial``), so what
they see is recorded in :data:`EVENTS` for the scenario to check. The module is importable by
name, so ``load_model_from_checkpoint_path`` finds the trial class from ``load_data.json``.
"""

from __future__ import annotations

import json
import math
import pathlib
from typing import Any

import numpy as np

import determined as det
from determined.keras._compat import keras

BATCH = 8
SAMPLES = 64
LEARNING_RATE = 0.05
EVENTS: dict[str, Any] = {}
"""What the last run saw: ``recorder``, ``initial_batches``, ``tensorboard``, ``final_weights``,
``learning_rate``, ``stop_requested``, ``train_sequence``."""


def data(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(SAMPLES, 4)).astype("float32")
    labels = (x[:, 0] > 0).astype("int64") + (x[:, 1] > 0.5).astype("int64")
    return x, np.eye(3, dtype="float32")[labels]


def compiled_model(context: det.keras.TFKerasTrialContext | None = None) -> Any:
    """A softmax classifier on 4 features, compiled with Adam (wrapped by ``context`` if given)."""
    model = keras.Sequential([keras.Input(shape=(4,)), keras.layers.Dense(3, activation="softmax")])
    optimizer = keras.optimizers.Adam(LEARNING_RATE)
    if context is not None:
        model, optimizer = context.wrap_model(model), context.wrap_optimizer(optimizer)
    model.compile(optimizer=optimizer, loss="categorical_crossentropy", metrics=["accuracy"])
    return model


class Recorder(det.keras.callbacks.Callback):
    """Records det's extra hooks and a few of Keras's; writes a file into every checkpoint."""

    def __init__(self, context: det.keras.TFKerasTrialContext) -> None:
        super().__init__()
        self.context = context
        self.calls: list[list[Any]] = []
        self.checkpoints = 0
        self.restored: Any = None

    def on_train_workload_begin(
        self, total_batches_trained: int, batches_requested: int | None, logs: dict[str, Any]
    ) -> None:
        self.calls.append(["begin", total_batches_trained, batches_requested])

    def on_train_workload_end(self, total_batches_trained: int, logs: dict[str, Any]) -> None:
        self.calls.append(["end", total_batches_trained, logs.get("batches"), "loss" in logs])

    def on_checkpoint_end(self, checkpoint_dir: str) -> None:
        self.checkpoints += 1
        (pathlib.Path(checkpoint_dir) / "recorder.json").write_text(json.dumps(self.calls))

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self.calls.append(["epoch_end", epoch, "val_loss" in (logs or {})])

    def on_test_end(self, logs: dict[str, Any] | None = None) -> None:
        self.calls.append(["test_end"])

    def on_train_end(self, logs: dict[str, Any] | None = None) -> None:
        EVENTS["final_weights"] = [np.array(w) for w in self.model.get_weights()]
        EVENTS["learning_rate"] = float(np.asarray(self.model.optimizer.learning_rate))
        EVENTS["stop_requested"] = self.context.get_stop_requested()

    def get_state(self) -> Any:
        return {"checkpoints": self.checkpoints, "calls": len(self.calls)}

    def load_state(self, state: Any) -> None:
        self.restored = state


class ArraySequence(keras.utils.Sequence):  # type: ignore[misc]
    """Batches of two arrays (a ``PyDataset`` on Keras 3)."""

    def __init__(self, arrays: tuple[np.ndarray, np.ndarray]) -> None:
        super().__init__()
        self.x, self.y = arrays

    def __len__(self) -> int:
        return math.ceil(len(self.x) / BATCH)

    def __getitem__(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        window = slice(index * BATCH, (index + 1) * BATCH)
        return self.x[window], self.y[window]


class HookTrial(det.keras.TFKerasTrial):
    """A softmax classifier with a Recorder and det's deprecated TensorBoard callback."""

    def __init__(self, context: det.keras.TFKerasTrialContext) -> None:
        super().__init__(context)
        EVENTS.setdefault("initial_batches", []).append(context.get_initial_batch())
        EVENTS["tensorboard"] = str(context.get_tensorboard_path())

    def build_model(self) -> Any:
        return compiled_model(self.context)

    def build_training_data_loader(self) -> Any:
        return data(0)

    def build_validation_data_loader(self) -> Any:
        return data(1)

    def keras_callbacks(self) -> list[Any]:
        recorder = Recorder(self.context)
        EVENTS["recorder"] = recorder
        return [recorder, det.keras.callbacks.TensorBoard(log_dir="ignored-in-a-trial")]


class StopTrial(HookTrial):
    """EarlyStopping and ReduceLROnPlateau that never see an improvement after the first
    validation (``min_delta`` is huge): the LR halves and training stops at the 2nd validation."""

    def keras_callbacks(self) -> list[Any]:
        recorder = Recorder(self.context)
        EVENTS["recorder"] = recorder
        return [
            det.keras.callbacks.EarlyStopping(monitor="val_loss", min_delta=100.0, patience=1),
            det.keras.callbacks.ReduceLROnPlateau(
                monitor="val_loss", min_delta=100.0, patience=1, factor=0.5
            ),
            recorder,
        ]


class SequenceTrial(HookTrial):
    """Data in SequenceAdapters, the training one with two loader threads."""

    def build_training_data_loader(self) -> Any:
        sequence = ArraySequence(data(0))
        EVENTS["train_sequence"] = sequence
        return det.keras.SequenceAdapter(sequence, workers=2, max_queue_size=5)

    def build_validation_data_loader(self) -> Any:
        return det.keras.SequenceAdapter(ArraySequence(data(1)))
