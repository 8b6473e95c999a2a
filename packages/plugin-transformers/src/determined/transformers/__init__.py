"""det.transformers: Determined's integration of the Hugging Face ``Trainer``.

- :class:`DetCallback`: reports the Trainer's training and evaluation logs as det metrics, stores
  every ``checkpoint-N`` directory the Trainer saves as a det checkpoint, reports progress, stops
  and checkpoints when preempted (pause, a searcher's stop), resumes from the trial's latest
  checkpoint, and follows an ASHA searcher's rungs on a det master. It also works off-cluster.

Names load on first use, so ``import determined.transformers`` imports no transformers or torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from determined.core.plugins import lazy_exports

if TYPE_CHECKING:
    from determined.transformers._hf_callback import DetCallback as DetCallback

_EXPORTS = {"DetCallback": "determined.transformers._hf_callback"}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
