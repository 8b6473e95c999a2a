"""``det.pytorch.lightning``: PyTorch Lightning on det, through Lightning's public API only.

- :class:`DetLogger` reports what a LightningModule logs as det training/validation metrics;
- :class:`DetCallback` checkpoints to det storage, honours preemption, reports searcher progress and
  resumes from the trial's latest checkpoint;
- :class:`CoreV2DetLogger` is upstream's ``determined.lightning.experimental.DetLogger``: a
  DetLogger that starts its own Core API run through ``determined.experimental.core_v2``;
- :func:`fit` wires both into a ``pl.Trainer`` and runs a LightningModule as a trial.

Both classes work from an ordinary ``pl.Trainer`` in a plain script, on a det cluster or off it::

    with det.core.init() as core_context:
        det_callback = DetCallback(core_context)
        trainer = pl.Trainer(logger=DetLogger(core_context), callbacks=[det_callback])
        trainer.fit(model, datamodule=data, ckpt_path=det_callback.resume_ckpt_path())
"""

from determined.pytorch.lightning._callback import DetCallback
from determined.pytorch.lightning._checkpoints import CHECKPOINT_FILE
from determined.pytorch.lightning._core_v2_logger import CoreV2DetLogger
from determined.pytorch.lightning._fit import fit, trial_hparams
from determined.pytorch.lightning._logger import DetLogger

__all__ = [
    "CHECKPOINT_FILE",
    "CoreV2DetLogger",
    "DetCallback",
    "DetLogger",
    "fit",
    "trial_hparams",
]
