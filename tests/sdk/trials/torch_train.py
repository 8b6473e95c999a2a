"""Train ``OneVarTrial`` with det's PyTorch Trainer: validate and checkpoint every 2 batches."""

import logging

from torch_onevar import OneVarTrial

import determined as det
from determined import pytorch

if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
    with pytorch.init(enable_tensorboard_logging=False) as context:
        trial = OneVarTrial(context)
        pytorch.Trainer(trial, context).fit(
            max_length=pytorch.Batch(6),
            validation_period=pytorch.Batch(2),
            checkpoint_period=pytorch.Batch(2),
            checkpoint_policy="all",
        )
