"""Train the blobs classifier with det's DeepSpeed Trainer, off-cluster or as an experiment.

    python train.py --batches 200                  # off-cluster, one process on CPU or GPU
    python -m determined.launch.deepspeed --num_gpus 2 -- python train.py     # two ranks

On a master the YAML files run it (const.yaml: 1 slot, distributed.yaml: 2 slots through the
DeepSpeed launcher); hyperparameters come from the experiment, and training resumes from the
trial's latest checkpoint after a pause. A batch is one optimizer step of ``train_batch_size``.
"""

from __future__ import annotations

import argparse
import logging

from model_def import BlobsTrial

import determined as det
from determined import pytorch
from determined.pytorch import deepspeed as det_ds

LOCAL_HPARAMS = {"hidden": 64, "dropout": 0.1, "deepspeed_config": "ds_config.json"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=200, help="training length in batches")
    parser.add_argument(
        "--validate-every", type=int, default=50, help="batches between validations"
    )
    args = parser.parse_args()
    info = det.get_cluster_info()
    hparams = info.trial.hparams if info is not None else LOCAL_HPARAMS
    latest_checkpoint = info.latest_checkpoint if info is not None else None
    with det_ds.init(hparams=hparams) as context:
        trial = BlobsTrial(context)
        det_ds.Trainer(trial, context).fit(
            max_length=pytorch.Batch(args.batches),
            validation_period=pytorch.Batch(args.validate_every),
            checkpoint_period=pytorch.Batch(args.validate_every),
            reporting_period=pytorch.Batch(10),
            latest_checkpoint=latest_checkpoint,
        )


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
    main()
