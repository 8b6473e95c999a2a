"""Train the digits classifier with det's PyTorch Trainer, off-cluster or as an experiment.

    python train.py --batches 300                 # off-cluster; checkpoints in the user data dir
    python -m determined.launch.torch_distributed --nproc_per_node 2 -- python train.py   # 2 ranks

On a master the YAML files run it; hyperparameters come from the experiment, training resumes from
the trial's latest checkpoint after a pause.
"""

from __future__ import annotations

import argparse
import logging

from model_def import DigitsTrial

import determined as det
from determined import pytorch

LOCAL_HPARAMS = {"global_batch_size": 32, "lr": 0.1, "hidden": 64, "dropout": 0.1, "momentum": 0.9}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=300, help="training length in batches")
    parser.add_argument(
        "--validate-every", type=int, default=100, help="batches between validations"
    )
    args = parser.parse_args()
    info = det.get_cluster_info()
    hparams = info.trial.hparams if info is not None else LOCAL_HPARAMS
    latest_checkpoint = info.latest_checkpoint if info is not None else None
    with pytorch.init(hparams=hparams) as context:
        trial = DigitsTrial(context)
        pytorch.Trainer(trial, context).fit(
            max_length=pytorch.Batch(args.batches),
            validation_period=pytorch.Batch(args.validate_every),
            checkpoint_period=pytorch.Batch(args.validate_every),
            reporting_period=pytorch.Batch(25),
            latest_checkpoint=latest_checkpoint,
        )


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
    main()
