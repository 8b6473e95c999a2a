"""det.estimator: upstream's EstimatorTrial for ``tf.estimator``, which exists only in TensorFlow < 2.16.

- :class:`EstimatorTrial` / :class:`EstimatorTrialContext`: the legacy Trial API
  (``entrypoint: model_def:MyTrial``), trained by det's trial-runner hook.
- :class:`RunHook`: a ``SessionRunHook`` that also hears about det checkpoints.
- :class:`MetricReducer` and ``context.make_metric``: custom evaluation metrics.
- :func:`load_estimator_from_checkpoint_path`: a checkpoint's SavedModel export.

Importing this package checks the installed TensorFlow from package metadata (cheap, no TensorFlow
import) and fails with one clear message when it is 2.16 or newer: ``tf.estimator`` is gone there, and
det-plugin-estimator never downgrades a user's TensorFlow behind their back. Everything else loads on
first use, so the plugin's entry point (``determined.estimator._plugin``) imports no TensorFlow.
"""

from __future__ import annotations

import importlib.metadata
from typing import TYPE_CHECKING

from determined.core.plugins import lazy_exports

MAX_TENSORFLOW = (2, 16)
"""The first TensorFlow version without ``tf.estimator``."""


def _check_tensorflow() -> None:
    """Raise one ImportError naming the fix when TensorFlow is missing or too new for tf.estimator."""

    def problem(found: str) -> ImportError:
        return ImportError(
            f"det-plugin-estimator needs TensorFlow < 2.16 ({found}): tf.estimator was removed in "
            "TensorFlow 2.16; install det-plugin-estimator in its own environment: "
            "pip install 'tensorflow<2.16' 'tensorflow-estimator<2.16' det-plugin-estimator"
        )

    try:
        version = importlib.metadata.version("tensorflow")
    except importlib.metadata.PackageNotFoundError:
        try:
            version = importlib.metadata.version("tensorflow-cpu")
        except importlib.metadata.PackageNotFoundError:
            raise problem("TensorFlow is not installed") from None
    parts = []
    for piece in version.split(".")[:2]:
        digits = "".join(c for c in piece if c.isdigit())
        parts.append(int(digits or 0))
    if tuple(parts) >= MAX_TENSORFLOW:
        raise problem(f"found tensorflow {version}")
    try:
        importlib.metadata.version("tensorflow-estimator")
    except importlib.metadata.PackageNotFoundError:
        raise problem("tensorflow-estimator is not installed") from None


_check_tensorflow()

if TYPE_CHECKING:
    from determined.estimator._checkpoint import (
        load_estimator_from_checkpoint_path as load_estimator_from_checkpoint_path,
    )
    from determined.estimator._reducer import MetricReducer as MetricReducer
    from determined.estimator._runner import EstimatorTrialRunner as EstimatorTrialRunner
    from determined.estimator._trial import EstimatorTrial as EstimatorTrial
    from determined.estimator._trial import EstimatorTrialContext as EstimatorTrialContext
    from determined.estimator._trial import RunHook as RunHook
    from determined.estimator._trial import ServingInputReceiverFn as ServingInputReceiverFn

_EXPORTS = {
    "EstimatorTrial": "determined.estimator._trial",
    "EstimatorTrialContext": "determined.estimator._trial",
    "EstimatorTrialRunner": "determined.estimator._runner",
    "MetricReducer": "determined.estimator._reducer",
    "RunHook": "determined.estimator._trial",
    "ServingInputReceiverFn": "determined.estimator._trial",
    "load_estimator_from_checkpoint_path": "determined.estimator._checkpoint",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
