"""det.keras: Determined's Keras APIs on Keras 3 (TensorFlow, torch or JAX backend) and tf.keras 2.

- :class:`DeterminedCallback`: metrics, progress, checkpoints, pause/resume and warm starts for
  ``model.fit()``.
- :class:`TensorBoard`: Keras's TensorBoard callback writing where det uploads from.
- :class:`TFKerasTrial` / :class:`TFKerasTrialContext`: the legacy Trial API (``entrypoint:
  model_def:MyTrial``), a thin layer over DeterminedCallback.
- Names Determined 0.38 deprecated and code still uses: :mod:`determined.keras.callbacks`
  (``Callback``, ``EarlyStopping``, ``ReduceLROnPlateau``, ``TensorBoard``),
  :func:`load_model_from_checkpoint_path`, :class:`TFKerasTensorBoard`, :class:`SequenceAdapter`.
- :func:`get_rng_state` / :func:`set_rng_state`: the state of the random number generators.

Names load on first use, so the plugin's entry point (``determined.keras._plugin``) imports no Keras.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from determined.core.plugins import lazy_exports

if TYPE_CHECKING:
    from determined.keras import callbacks as callbacks
    from determined.keras._callback import DeterminedCallback as DeterminedCallback
    from determined.keras._data import ArrayLike as ArrayLike
    from determined.keras._data import SequenceAdapter as SequenceAdapter
    from determined.keras._load import (
        load_model_from_checkpoint_path as load_model_from_checkpoint_path,
    )
    from determined.keras._rng import get_rng_state as get_rng_state
    from determined.keras._rng import set_rng_state as set_rng_state
    from determined.keras._tensorboard import TensorBoard as TensorBoard
    from determined.keras._trial import InputData as InputData
    from determined.keras._trial import TFKerasTrial as TFKerasTrial
    from determined.keras._trial import TFKerasTrialContext as TFKerasTrialContext
    from determined.keras._trial_runner import TFKerasTrialRunner as TFKerasTrialRunner
    from determined.keras.callbacks import TFKerasTensorBoard as TFKerasTensorBoard

_EXPORTS = {
    "DeterminedCallback": "determined.keras._callback",
    "TensorBoard": "determined.keras._tensorboard",
    "InputData": "determined.keras._trial",
    "TFKerasTrial": "determined.keras._trial",
    "TFKerasTrialContext": "determined.keras._trial",
    "TFKerasTrialRunner": "determined.keras._trial_runner",
    "SequenceAdapter": "determined.keras._data",
    "load_model_from_checkpoint_path": "determined.keras._load",
    "TFKerasTensorBoard": "determined.keras.callbacks",
    "ArrayLike": "determined.keras._data",
    "get_rng_state": "determined.keras._rng",
    "set_rng_state": "determined.keras._rng",
}

__all__ = sorted([*_EXPORTS, "callbacks"])


_export, _exported = lazy_exports(__name__, _EXPORTS)


def __getattr__(name: str) -> Any:
    if name == "callbacks":  # a submodule, imported on first use like the names above
        return importlib.import_module(f"{__name__}.callbacks")
    return _export(name)


def __dir__() -> list[str]:
    return sorted([*_exported(), "callbacks"])
