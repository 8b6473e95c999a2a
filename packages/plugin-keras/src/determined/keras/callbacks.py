"""det.keras.callbacks: the Keras callbacks Determined 0.38 deprecated, kept for TFKerasTrial code.

- :class:`Callback`: a Keras callback with det's extra hooks (``on_train_workload_begin/end``,
  ``on_checkpoint_end``) and state that is saved in every checkpoint (``get_state``/``load_state``).
- :class:`EarlyStopping` and :class:`ReduceLROnPlateau`: Keras's callbacks, driven by each
  validation (``on_test_end``) instead of each epoch, with their counters kept across pauses.
- :class:`TensorBoard`: Keras's TensorBoard callback, writing where det uploads TensorBoard files
  from when it runs in a TFKerasTrial.

They work in a TFKerasTrial's ``keras_callbacks()`` (where det's runner fires the extra hooks and
saves the state) and as plain Keras callbacks in any ``fit()`` (where only Keras's hooks fire).
New code should train with :class:`~determined.keras.DeterminedCallback` and Keras's own callbacks.

Differences from upstream: ``on_epoch_end`` gets Keras's real logs at the end of real epochs
(upstream called it with empty logs on a count of records); EarlyStopping and ReduceLROnPlateau
also save their best value (upstream lost it on resume, so the first validation after a pause
always counted as an improvement); states are pickled into ``keras_callbacks_state.pkl``.
"""

from __future__ import annotations

import logging
import warnings
from typing import Any

from determined.keras._compat import keras

logger = logging.getLogger("determined.keras")

__all__ = ["Callback", "EarlyStopping", "ReduceLROnPlateau", "TensorBoard"]

_ADVICE = (
    "it belongs to TFKerasTrial, also deprecated. Train with det.keras.DeterminedCallback "
    "and use Keras's own callbacks with it"
)


def _deprecated(what: str, advice: str = _ADVICE, stacklevel: int = 3) -> None:
    warnings.warn(
        f"{what} is deprecated since Determined 0.38.0 and will be removed: {advice}.",
        FutureWarning,
        stacklevel=stacklevel,
    )


class Callback(keras.callbacks.Callback):  # type: ignore[misc]
    """A Keras callback with det's extra hooks, for TFKerasTrial's ``keras_callbacks()``.

    Deprecated since Determined 0.38.0: with :class:`~determined.keras.DeterminedCallback` use
    plain Keras callbacks. In a TFKerasTrial, det's runner calls the hooks below besides Keras's;
    as a plain Keras callback only Keras's hooks fire.
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__module__ != __name__:
            _deprecated(f"det.keras.callbacks.Callback (subclassed by {cls.__qualname__})")

    def __init__(self) -> None:
        super().__init__()
        if type(self) is Callback:
            _deprecated("det.keras.callbacks.Callback")

    def on_train_workload_begin(
        self, total_batches_trained: int, batches_requested: int | None, logs: dict[str, Any]
    ) -> None:
        """Before a chunk of training of at most ``scheduling_unit`` batches.

        Args:
            total_batches_trained: batches trained before this chunk (resumed trials included).
            batches_requested: batches this chunk will train, when known.
            logs: an empty dict.
        """

    def on_train_workload_end(self, total_batches_trained: int, logs: dict[str, Any]) -> None:
        """After a chunk of training; ``logs`` holds Keras's running training metrics and the
        ``batches``/``epochs`` counters (what det reports as training metrics)."""

    def on_checkpoint_end(self, checkpoint_dir: str) -> None:
        """Once the model is written into ``checkpoint_dir`` and before the checkpoint is
        stored: files written there become part of the checkpoint (the chief only)."""

    def get_state(self) -> Any:
        """This callback's state, saved (pickled) with every checkpoint; ``None`` by default."""
        return None

    def load_state(self, state: Any) -> None:
        """Take back what :meth:`get_state` returned, when a trial resumes (after every
        callback's ``on_train_begin``)."""


def _validation_logs(logs: dict[str, Any] | None) -> dict[str, Any]:
    """``on_test_end``'s logs, with each metric also under its ``val_`` name (``loss`` →
    ``val_loss``), since Keras gives on_test_end the plain names and ``monitor`` uses ``val_``."""
    found = dict(logs or {})
    for name, value in list(found.items()):
        if not name.startswith("val_"):
            found.setdefault(f"val_{name}", value)
    return found


def _state_of(callback: Any, names: tuple[str, ...]) -> dict[str, Any]:
    return {name: getattr(callback, name) for name in names if hasattr(callback, name)}


def _load_into(callback: Any, names: tuple[str, ...], state: Any) -> None:
    for name in names:
        if isinstance(state, dict) and name in state:
            setattr(callback, name, state[name])


class _PerValidation:
    """What EarlyStopping and ReduceLROnPlateau share: the Keras callback after this class in the
    MRO runs its ``on_epoch_end`` once per validation (``on_test_end``) instead of per epoch, and
    the attributes named in ``_STATE`` are its checkpointed state."""

    _STATE: tuple[str, ...] = ()
    test_end_count = 0

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        return None  # validations drive this callback, not epochs

    def on_test_end(self, logs: dict[str, Any] | None = None) -> None:
        super().on_epoch_end(self.test_end_count, _validation_logs(logs))  # type: ignore[misc]
        self.test_end_count += 1

    def get_state(self) -> Any:
        return _state_of(self, self._STATE)

    def load_state(self, state: Any) -> None:
        _load_into(self, self._STATE, state)


class EarlyStopping(_PerValidation, keras.callbacks.EarlyStopping, Callback):  # type: ignore[misc]
    """``keras.callbacks.EarlyStopping`` checked after every validation (``on_test_end``) instead
    of every epoch, whose counters survive a pause.

    In a TFKerasTrial validation runs every ``min_validation_period`` epochs, so that setting
    decides how often it checks. ``monitor`` names a validation metric with or without its
    ``val_`` prefix. When it stops training, the trial ends as if
    ``context.set_stop_requested(True)`` had been called. Takes Keras's arguments.
    """

    _STATE = ("wait", "stopped_epoch", "best", "best_epoch", "best_weights", "test_end_count")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        keras.callbacks.EarlyStopping.__init__(self, *args, **kwargs)
        self.test_end_count = 0
        _deprecated(
            "det.keras.callbacks.EarlyStopping",
            "it adapts Keras's EarlyStopping to TFKerasTrial, also deprecated. Train with "
            "det.keras.DeterminedCallback and use keras.callbacks.EarlyStopping with it",
        )


class ReduceLROnPlateau(_PerValidation, keras.callbacks.ReduceLROnPlateau, Callback):  # type: ignore[misc]
    """``keras.callbacks.ReduceLROnPlateau`` checked after every validation (``on_test_end``)
    instead of every epoch, whose counters survive a pause. Takes Keras's arguments; ``monitor``
    names a validation metric with or without its ``val_`` prefix."""

    _STATE = ("wait", "cooldown_counter", "best", "test_end_count")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        keras.callbacks.ReduceLROnPlateau.__init__(self, *args, **kwargs)
        self.test_end_count = 0
        _deprecated(
            "det.keras.callbacks.ReduceLROnPlateau",
            "it adapts Keras's ReduceLROnPlateau to TFKerasTrial, also deprecated. Train with "
            "det.keras.DeterminedCallback and use keras.callbacks.ReduceLROnPlateau with it",
        )


class TensorBoard(keras.callbacks.TensorBoard, Callback):  # type: ignore[misc]
    """``keras.callbacks.TensorBoard`` for TFKerasTrial: in a trial it writes into the trial's
    TensorBoard directory (which det uploads to checkpoint storage), ignoring a ``log_dir`` with
    a warning. As a plain Keras callback it writes to the ``log_dir`` given (Keras's default
    ``logs`` otherwise). Event files are flushed at the end of every epoch and before every
    checkpoint is stored. Takes Keras's arguments."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if "log_dir" in kwargs:
            self._given_log_dir: Any = kwargs["log_dir"]
        else:
            self._given_log_dir = args[0] if args else None
        keras.callbacks.TensorBoard.__init__(self, *args, **kwargs)
        _deprecated(
            "det.keras.callbacks.TensorBoard",
            "it belongs to TFKerasTrial, also deprecated. Train with "
            "det.keras.DeterminedCallback and use det.keras.TensorBoard with it",
        )

    def _use_trial_directory(self, path: str) -> None:
        """Write into ``path`` (det's runner calls it with the trial's TensorBoard directory
        before training starts)."""
        if self._given_log_dir is not None and str(self._given_log_dir) != str(path):
            logger.warning(
                "det.keras.callbacks.TensorBoard: log_dir=%r is ignored in a trial; writing to %s",
                self._given_log_dir,
                path,
            )
        self.log_dir = str(path)

    def _flush(self) -> None:
        """Flush the event files written so far."""
        for writer in list(getattr(self, "_writers", {}).values()):
            writer.flush()

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        keras.callbacks.TensorBoard.on_epoch_end(self, epoch, logs)
        self._flush()

    def on_checkpoint_end(self, checkpoint_dir: str) -> None:
        self._flush()


class TFKerasTensorBoard(TensorBoard):
    """Upstream's older name for :class:`TensorBoard` (``det.keras.TFKerasTensorBoard``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _deprecated(
            "det.keras.TFKerasTensorBoard",
            "it is an old name of det.keras.callbacks.TensorBoard, itself deprecated",
        )
        TensorBoard.__init__(self, *args, **kwargs)
