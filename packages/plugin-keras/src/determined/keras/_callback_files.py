"""What DeterminedCallback writes into a checkpoint and reads back, besides the model itself.

A checkpoint holds the model (``MODEL_FILE``, written by the callback's ``save_model``), the
optimizer's variables on Keras 2 (``OPTIMIZER_FILE``; Keras 3 keeps them in the weights file) and
the callback's counters as JSON (``STATE_FILE``).
"""

from __future__ import annotations

import json
import logging
import pathlib
from typing import Any

import numpy as np

from determined.keras import _compat
from determined.keras._compat import keras

logger = logging.getLogger("determined.keras")

MODEL_FILE = "model_checkpoint.weights.h5"
"""The model's weights inside a checkpoint (Keras ``save_weights`` format)."""
OPTIMIZER_FILE = "optimizer_state.npz"
"""Optimizer variables, positionally (written on Keras 2 only: Keras 3 keeps them in MODEL_FILE)."""
STATE_FILE = "callback_state.json"
"""Epoch, steps_completed, continue_id and the epoch lengths."""
STATE_FORMAT = 1


def require_built_model(model: Any, checkpoint: str) -> None:
    """Raise RuntimeError when ``model`` has no weights yet to restore ``checkpoint`` into."""
    if not getattr(model, "built", True):
        raise RuntimeError(
            f"DeterminedCallback: cannot restore checkpoint {checkpoint}: the model is not "
            "built; give it an Input layer or call model.build(input_shape) before fit()"
        )


def optimizer_values(model: Any) -> list[np.ndarray] | None:
    """The model's optimizer variables as arrays, or ``None`` without an optimizer.

    Every rank calls it: reading may take part in a distribution strategy's collectives.
    """
    optimizer = getattr(model, "optimizer", None)
    if optimizer is None:
        return None
    return [
        np.asarray(v) for v in keras.backend.batch_get_value(_compat.optimizer_variables(optimizer))
    ]


def write_optimizer(path: pathlib.Path, values: list[np.ndarray]) -> None:
    """Write what :func:`optimizer_values` returned to ``path`` (``OPTIMIZER_FILE``)."""
    with path.open("wb") as f:
        np.savez(f, *values)


def load_optimizer(model: Any, path: pathlib.Path) -> None:
    """Assign the variables saved in ``path`` to the model's optimizer, if they fit it."""
    optimizer = getattr(model, "optimizer", None)
    if optimizer is None:
        return
    variables = _compat.optimizer_variables(optimizer)
    with np.load(path) as saved:
        values = [saved[f"arr_{i}"] for i in range(len(saved.files))]
    shapes = [tuple(v.shape) for v in variables]
    if len(values) != len(variables) or shapes != [tuple(v.shape) for v in values]:
        logger.warning(
            "optimizer state not restored: the checkpoint has %d variables, the optimizer %d "
            "(or their shapes differ)",
            len(values),
            len(variables),
        )
        return
    with _compat.strategy_scope(model):
        for variable, value in zip(variables, values, strict=True):
            variable.assign(value)


def write_state(checkpoint_dir: pathlib.Path, state: dict[str, Any]) -> None:
    """Write the callback's counters (``STATE_FILE``), tagged with ``STATE_FORMAT``."""
    text = json.dumps({"format": STATE_FORMAT, **state}, indent=2)
    (checkpoint_dir / STATE_FILE).write_text(text)


def read_state(checkpoint_dir: pathlib.Path) -> dict[str, Any]:
    """The counters :func:`write_state` wrote, or ``{}`` for a checkpoint without them."""
    state_file = checkpoint_dir / STATE_FILE
    state: dict[str, Any] = json.loads(state_file.read_text()) if state_file.exists() else {}
    return state
