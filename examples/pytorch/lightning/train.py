"""Train the digits classifier with Lightning: ``python train.py`` here, or as a det experiment.

On a det master (``const.yaml``, ``adaptive.yaml``) the trial's hyperparameters build the model,
metrics and checkpoints go to det, a pause or an ASHA stop ends training cleanly after a
checkpoint, and a resumed trial continues from it. Off-cluster the same script trains with the
defaults below and stores checkpoints under the user data dir.
"""

from __future__ import annotations

import logging

from model import DigitsClassifier, DigitsDataModule

import determined as det
from determined.pytorch import lightning as det_lightning

DEFAULT_HPARAMS = {"lr": 0.01, "hidden_size": 64, "dropout": 0.1, "batch_size": 32}

TRAINER_KWARGS = {
    "max_steps": 200,  # an ASHA searcher's time_metric/max_time replaces it on-cluster
    "val_check_interval": 50,  # validate every 50 batches...
    "check_val_every_n_epoch": None,  # ...counted across epochs
    "log_every_n_steps": 10,
    "enable_model_summary": False,
}


def main() -> None:
    det_lightning.fit(
        DigitsClassifier,
        DigitsDataModule,
        hparams=DEFAULT_HPARAMS,
        trainer_kwargs=TRAINER_KWARGS,
    )


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
    main()
