"""det.keras: Determined's Keras APIs on Keras 3 (TensorFlow, torch or JAX backend) and tf.keras 2.

- :class:`DeterminedCallback`: metrics, progress, checkpoints, pause/resume and warm starts for
  ``model.fit()``.
- :class:`TensorBoard`: Keras's TensorBoard callback writing where det uploads from.
- :class:`TFKerasTrial` / :class:`TFKerasTrialContext`: the legacy Trial API (``entrypoint:
  model_def:MyTrial``), a thin layer over DeterminedCallback.

Names load on first use, so the plugin's entry point (``determined.keras._plugin``) imports no Keras.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from determined.core.plugins import lazy_exports

if TYPE_CHECKING:
    from determined.keras._callback import DeterminedCallback as DeterminedCallback
    from determined.keras._tensorboard import TensorBoard as TensorBoard
    from determined.keras._trial import InputData as InputData
    from determined.keras._trial import TFKerasTrial as TFKerasTrial
    from determined.keras._trial import TFKerasTrialContext as TFKerasTrialContext
    from determined.keras._trial_runner import TFKerasTrialRunner as TFKerasTrialRunner

_EXPORTS = {
    "DeterminedCallback": "determined.keras._callback",
    "TensorBoard": "determined.keras._tensorboard",
    "InputData": "determined.keras._trial",
    "TFKerasTrial": "determined.keras._trial",
    "TFKerasTrialContext": "determined.keras._trial",
    "TFKerasTrialRunner": "determined.keras._trial_runner",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
