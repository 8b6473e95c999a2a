"""det-plugin-keras's hook implementations (entry point ``keras`` in the group ``determined``).

Imported by every process that builds det's plugin manager, so it must stay cheap: it imports Keras
only for a class that already is a TFKerasTrial (whose module imported Keras anyway).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from determined.core import hookimpl

if TYPE_CHECKING:
    from determined.core import TrialRunner

TRIAL_MODULE = "determined.keras._trial"


@hookimpl
def det_trial_runner(trial_class: type) -> TrialRunner | None:
    """A TFKerasTrialRunner for subclasses of ``det.keras.TFKerasTrial``; ``None`` for anything else."""
    module = sys.modules.get(TRIAL_MODULE)
    if module is None or not issubclass(trial_class, getattr(module, "TFKerasTrial")):  # noqa: B009
        return None
    from determined.keras._trial_runner import TFKerasTrialRunner

    runner: TrialRunner = TFKerasTrialRunner()
    return runner
