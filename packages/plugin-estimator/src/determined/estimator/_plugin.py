"""det-plugin-estimator's hook implementations (entry point ``estimator`` in the group ``determined``).

Imported by every process that builds det's plugin manager, so it imports no TensorFlow: a class can
only be an EstimatorTrial when its module already imported ``determined.estimator._trial``.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from determined.core import hookimpl

if TYPE_CHECKING:
    from determined.core import TrialRunner

TRIAL_MODULE = "determined.estimator._trial"


@hookimpl
def det_trial_runner(trial_class: type) -> TrialRunner | None:
    """An EstimatorTrialRunner for subclasses of ``det.estimator.EstimatorTrial``; else ``None``."""
    module = sys.modules.get(TRIAL_MODULE)
    if module is None or not isinstance(trial_class, type):
        return None
    if not issubclass(trial_class, module.EstimatorTrial):
        return None
    from determined.estimator._runner import EstimatorTrialRunner

    runner: TrialRunner = EstimatorTrialRunner()
    return runner
