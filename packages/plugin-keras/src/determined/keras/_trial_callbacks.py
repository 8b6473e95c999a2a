"""TrialCallbacks: the DeterminedCallback of a TFKerasTrial, driving the trial's keras_callbacks().

``fit()`` gets this one callback; it holds the trial's own callbacks and calls each Keras hook on
them itself, so that det can:

- fire :class:`determined.keras.callbacks.Callback`'s extra hooks: ``on_train_workload_begin/end``
  around every ``scheduling_unit`` batches (the training-metrics reports), ``on_checkpoint_end``
  once a checkpoint holds the model;
- save every such callback's ``get_state()`` with each checkpoint and give it back with
  ``load_state()`` on resume, after all ``on_train_begin`` hooks (which reset Keras's counters);
- hide an epoch cut short by a pause from them (its batches run again after the resume);
- order the hooks so that checkpoints hold what the epoch's callbacks did, and a callback that
  sets ``model.stop_training`` ends the trial as ``context.set_stop_requested(True)`` does;
- write ``load_data.json`` (and, on a master, the trial's code) into every checkpoint, which
  :func:`determined.keras.load_model_from_checkpoint_path` reads.
"""

from __future__ import annotations

import json
import logging
import pathlib
import pickle
import shutil
from typing import TYPE_CHECKING, Any

import numpy as np

from determined.keras import _compat
from determined.keras._callback import DeterminedCallback
from determined.keras._callback_files import read_state
from determined.keras._callback_reporting import metrics_with_counters
from determined.keras.callbacks import Callback, TensorBoard

if TYPE_CHECKING:
    from determined import core
    from determined.keras._trial import TFKerasTrial, TFKerasTrialContext

logger = logging.getLogger("determined.keras")

CALLBACKS_STATE_FILE = "keras_callbacks_state.pkl"
"""The trial's callbacks' ``get_state()`` values, pickled, in every checkpoint of a TFKerasTrial."""
LOAD_DATA_FILE = "load_data.json"
"""What loading needs: trial_type, experiment_config, hparams, trial_cls_spec (as upstream)."""
CODE_DIR = "code"
"""The trial's code (its context directory), copied into checkpoints taken on a master."""
_CODE_IGNORE = ("__pycache__", "*.pyc", ".git", "*.h5", "*.keras", "*.ckpt*")


def _numpy_logs(logs: dict[str, Any]) -> dict[str, Any]:
    """Keras 2's logs with tensors as numpy values (what it gives callbacks without tf logs)."""
    converted = {}
    for name, value in logs.items():
        array = np.asarray(value)
        converted[name] = array.item() if array.ndim == 0 else array
    return converted


class TrialCallbacks(DeterminedCallback):  # type: ignore[misc]
    """A DeterminedCallback that also runs a TFKerasTrial's ``keras_callbacks()``.

    Args:
        core_context, checkpoint, continue_id, **kwargs: as for DeterminedCallback; the training
            metrics report period (an int) is also the workload length of the det hooks.
        context: the trial's context (``set_stop_requested``, config and hyperparameters).
        trial: the trial (its class is recorded in ``load_data.json``).
        callbacks: the trial's Keras callbacks, in order.
        copy_code: copy the working directory into each checkpoint's ``code/`` (on a master).
    """

    def __init__(
        self,
        core_context: core.Context,
        checkpoint: str | None,
        continue_id: int | str,
        *,
        context: TFKerasTrialContext,
        trial: TFKerasTrial,
        callbacks: list[Any],
        copy_code: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(core_context, checkpoint, continue_id, **kwargs)
        self._context = context
        self._trial = trial
        self._all = list(callbacks)
        # Keras skips chief-only callbacks on other workers; so do we.
        self._callbacks = [
            cb for cb in self._all if self._is_chief or not getattr(cb, "_chief_worker_only", False)
        ]
        self._det_callbacks = [cb for cb in self._callbacks if isinstance(cb, Callback)]
        self._copy_code = copy_code
        self._loaded_states: list[Any] | None = None
        self._workload_open = False
        self._workload_logs: dict[str, Any] = {}
        tensorboard_dir = str(core_context.train.get_tensorboard_path())
        for callback in self._all:
            if isinstance(callback, TensorBoard):
                callback._use_trial_directory(tensorboard_dir)

    # -- calling the trial's callbacks -----------------------------------------------------------

    def _forward(self, hook: str, *args: Any, logs: dict[str, Any] | None = None) -> None:
        converted: dict[str, Any] | None = None
        for callback in self._callbacks:
            given = logs
            if logs and _compat.KERAS_MAJOR < 3 and not getattr(callback, "_supports_tf_logs", 0):
                if converted is None:
                    converted = _numpy_logs(logs)
                given = converted
            getattr(callback, hook)(*args, given)

    def _in_cut_epoch(self) -> bool:
        """Inside an epoch that a pause cut short (it runs again, whole, after the resume)."""
        return bool(self._in_fit and self._epoch_interrupted)

    def _note_user_stop(self) -> None:
        """A callback that stopped training (EarlyStopping...) ends the trial, as upstream did."""
        if self.model.stop_training and not self._preempted:
            if not self._context.get_stop_requested():
                logger.info("a Keras callback stopped training: the trial stops here")
            self._context.set_stop_requested(True)

    def _batches_left(self) -> int | None:
        steps = self.params.get("steps") if self.params else None
        epochs = self.params.get("epochs") if self.params else None
        if not steps or not epochs:
            return None
        return max(int((epochs - self._epoch) * steps - self._epoch_batches), 0)

    def _begin_workload(self) -> None:
        self._workload_open = True
        period = self._report_period if isinstance(self._report_period, int) else None
        requested = period - self._steps_completed % period if period else None
        left = self._batches_left()
        if requested is None or (left is not None and left < requested):
            requested = left
        for callback in self._det_callbacks:
            callback.on_train_workload_begin(self._steps_completed, requested, {})

    def _end_workload(self) -> None:
        self._workload_open = False
        metrics = metrics_with_counters(self._workload_logs, self._epoch + 1, self._steps_completed)
        for callback in self._det_callbacks:
            callback.on_train_workload_end(self._steps_completed, dict(metrics))

    # -- Keras hooks -------------------------------------------------------------------------------

    def set_model(self, model: Any) -> None:
        super().set_model(model)
        for callback in self._callbacks:
            callback.set_model(model)

    def set_params(self, params: dict[str, Any]) -> None:
        super().set_params(params)
        for callback in self._callbacks:
            callback.set_params(params)

    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        super().on_train_begin(logs)  # restores the checkpoint, keeping the callbacks' states
        self._forward("on_train_begin", logs=logs)
        states, self._loaded_states = self._loaded_states, None
        if states is not None:
            for callback, state in zip(self._all, states, strict=False):
                if isinstance(callback, Callback):
                    callback.load_state(state)
        self._workload_open = False

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        super().on_epoch_begin(epoch, logs)
        self._forward("on_epoch_begin", epoch, logs=logs)

    def on_train_batch_begin(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        if not self._workload_open:
            self._begin_workload()
        self._forward("on_train_batch_begin", batch, logs=logs)

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        before = self._steps_completed
        super().on_train_batch_end(batch, logs)
        self._forward("on_train_batch_end", batch, logs=logs)
        self._note_user_stop()
        self._workload_logs = dict(logs or {})
        period = self._report_period
        if isinstance(period, int) and self._steps_completed // period > before // period:
            self._end_workload()

    def on_test_begin(self, logs: dict[str, Any] | None = None) -> None:
        super().on_test_begin(logs)
        if not self._in_cut_epoch():
            self._forward("on_test_begin", logs=logs)

    def on_test_batch_begin(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        if not self._in_cut_epoch():
            self._forward("on_test_batch_begin", batch, logs=logs)

    def on_test_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        super().on_test_batch_end(batch, logs)
        if not self._in_cut_epoch():
            self._forward("on_test_batch_end", batch, logs=logs)

    def on_test_end(self, logs: dict[str, Any] | None = None) -> None:
        super().on_test_end(logs)
        if not self._in_cut_epoch():
            self._forward("on_test_end", logs=logs)
            self._note_user_stop()

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        # The trial's callbacks first, so that this epoch's checkpoint holds what they did.
        if not self._epoch_interrupted:
            self._forward("on_epoch_end", epoch, logs=logs)
            self._note_user_stop()
        if self._context.get_stop_requested():
            self.model.stop_training = True
        super().on_epoch_end(epoch, logs)

    def on_train_end(self, logs: dict[str, Any] | None = None) -> None:
        if self._workload_open:
            self._end_workload()
        super().on_train_end(logs)  # the last checkpoint, before callbacks change the model
        self._forward("on_train_end", logs=logs)

    def on_predict_begin(self, logs: dict[str, Any] | None = None) -> None:
        self._forward("on_predict_begin", logs=logs)

    def on_predict_batch_begin(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        self._forward("on_predict_batch_begin", batch, logs=logs)

    def on_predict_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        self._forward("on_predict_batch_end", batch, logs=logs)

    def on_predict_end(self, logs: dict[str, Any] | None = None) -> None:
        self._forward("on_predict_end", logs=logs)

    # -- checkpoint files --------------------------------------------------------------------------

    def save_model(self, model: Any, path: str, distributed: core.DistributedContext) -> None:
        super().save_model(model, path, distributed)
        if distributed.rank == 0:
            self._save_trial_files(pathlib.Path(path).parent)

    def load_model(self, model: Any, path: str, distributed: core.DistributedContext) -> None:
        super().load_model(model, path, distributed)
        directory = pathlib.Path(path).parent
        continues = read_state(directory).get("continue_id") == self._continue_id
        self._load_callback_states(directory, continues)

    def _save_trial_files(self, path: pathlib.Path) -> None:
        states = []
        for callback in self._all:
            state = callback.get_state() if isinstance(callback, Callback) else None
            states.append(state)
        try:
            data = pickle.dumps({"format": 1, "callbacks": states})
        except Exception as exc:
            raise TypeError(
                f"det.keras.callbacks.Callback.get_state() must return a picklable value: {exc}"
            ) from exc
        (path / CALLBACKS_STATE_FILE).write_bytes(data)
        trial_class = type(self._trial)
        load_data = {
            "trial_type": "TFKerasTrial",
            "experiment_config": self._context.get_experiment_config(),
            "hparams": self._context.get_hparams(),
            "trial_cls_spec": f"{trial_class.__module__}:{trial_class.__qualname__}",
        }
        (path / LOAD_DATA_FILE).write_text(json.dumps(load_data, default=str))
        if self._copy_code:
            try:
                shutil.copytree(
                    pathlib.Path.cwd(),
                    path / CODE_DIR,
                    ignore=shutil.ignore_patterns(*_CODE_IGNORE),
                    symlinks=True,
                )
            except (OSError, shutil.Error) as exc:
                logger.warning("the trial's code was not copied into the checkpoint: %s", exc)
        for callback in self._det_callbacks:
            callback.on_checkpoint_end(str(path))

    def _load_callback_states(self, path: pathlib.Path, continues: bool) -> None:
        state_file = path / CALLBACKS_STATE_FILE
        if not continues or not state_file.exists():
            return  # a warm start, or a checkpoint of plain DeterminedCallback: fresh callbacks
        saved = pickle.loads(state_file.read_bytes())
        states = list(saved.get("callbacks") or [])
        if len(states) != len(self._all):
            logger.warning(
                "the checkpoint holds the state of %d Keras callbacks, the trial has %d: "
                "matching them in order",
                len(states),
                len(self._all),
            )
        self._loaded_states = states
