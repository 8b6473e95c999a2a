"""Which Keras user models are built with, and the few places where Keras 2 and Keras 3 differ.

Everything here uses public Keras API, with two documented exceptions in :func:`set_initial_epoch`
and :func:`clear_initial_epoch`: ``fit()`` has no public way for a callback to move its first epoch,
so they set the attribute Keras's own ``keras.callbacks.BackupAndRestore`` sets for that purpose.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from typing import Any

import numpy as np

logger = logging.getLogger("determined.keras")


def _load_keras() -> Any:
    """``keras`` (Keras 3, or Keras 2.15 which *is* tf.keras there), or ``tf_keras`` when TensorFlow
    is told to use legacy Keras (``TF_USE_LEGACY_KERAS=1``) and it is installed."""
    if os.environ.get("TF_USE_LEGACY_KERAS", "").lower() in ("1", "true", "yes"):
        try:
            import tf_keras

            return tf_keras
        except ImportError:
            pass
    import keras

    return keras


keras: Any = _load_keras()
KERAS_MAJOR = int(str(keras.__version__).split(".")[0])


def backend_name() -> str:
    """``tensorflow``, ``torch`` or ``jax`` (always ``tensorflow`` on Keras 2)."""
    if KERAS_MAJOR < 3:
        return "tensorflow"
    return str(keras.backend.backend())


def set_initial_epoch(model: Any, epoch: int) -> None:
    """Make the running ``fit()`` start at ``epoch`` (called from ``on_train_begin``).

    Keras 3's trainers read ``model._initial_epoch`` right after ``on_train_begin``; Keras 2 asks
    ``model._training_state`` for its initial counters. Both are what BackupAndRestore uses.
    """
    if KERAS_MAJOR >= 3:
        model._initial_epoch = epoch
        return

    class _ResumeAt:
        """Keras 2's training-state protocol, answering with our epoch (always at batch 0)."""

        def maybe_load_initial_counters_from_ckpt(
            self, steps_per_epoch: Any, initial_epoch: int, mode: Any = None
        ) -> tuple[int, int]:
            return epoch, 0

        def maybe_load_initial_epoch_from_ckpt(self, initial_epoch: int, mode: Any = None) -> int:
            return epoch

        def back_up(self, *_: Any, **__: Any) -> None:
            return None

        def delete_backup(self) -> None:
            return None

    model._training_state = _ResumeAt()


def clear_initial_epoch(model: Any) -> None:
    """Undo :func:`set_initial_epoch`, so a later ``fit()`` on the same model starts normally."""
    if KERAS_MAJOR >= 3:
        if getattr(model, "_initial_epoch", None) is not None:
            model._initial_epoch = None
    elif getattr(model, "_training_state", None) is not None:
        model._training_state = None


@contextlib.contextmanager
def strategy_scope(model: Any) -> Iterator[None]:
    """The model's tf.distribute strategy scope (TensorFlow backend), else nothing."""
    strategy = (
        getattr(model, "distribute_strategy", None) if backend_name() == "tensorflow" else None
    )
    if strategy is None:
        yield
        return
    with strategy.scope():
        yield


def optimizer_variables(optimizer: Any) -> list[Any]:
    """The optimizer's variables (a property on Keras 3 and Keras 2's new optimizers, a method on
    Keras 2's legacy ones)."""
    variables = optimizer.variables
    if callable(variables):
        variables = variables()
    return list(variables)


def build_optimizer(model: Any) -> None:
    """Create the optimizer's variables now, so checkpointed values can be assigned to them."""
    optimizer = getattr(model, "optimizer", None)
    if optimizer is None:
        return
    with strategy_scope(model):
        if KERAS_MAJOR >= 3 or hasattr(optimizer, "build"):
            if not getattr(optimizer, "built", False) and not getattr(optimizer, "_built", False):
                optimizer.build(model.trainable_variables)
        elif hasattr(optimizer, "_create_all_weights"):  # Keras 2 legacy optimizers
            optimizer._create_all_weights(model.trainable_variables)


def to_python(value: Any) -> Any:
    """A metric value as a plain Python number (or list), converting tensors and numpy scalars."""
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    array = np.asarray(value)
    if array.size == 1:
        item = array.reshape(()).item()
        return item
    return array.tolist()
