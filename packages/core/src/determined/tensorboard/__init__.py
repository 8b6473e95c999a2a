"""TensorBoard over the event files det trials upload to checkpoint storage.

Trials write TensorBoard files locally (``det.keras.TensorBoard``, the PyTorch and DeepSpeed
trainers' writers, ``core.train.get_tensorboard_path()``) and det-core uploads them to
``<checkpoint storage>/tensorboard/experiment/<exp>/trial/<trial>/``. This package brings them back
for viewing: :class:`EventSync` mirrors them into one local directory (one run ``trial_<id>`` per
trial, kept up to date while trials run) and :func:`serve` runs TensorBoard on it; the master runs
``python -m determined.tensorboard`` as a task behind its proxy (``det tensorboard start``). It works
for every storage backend (any fsspec filesystem; other plugins through their ``download``).
"""

from __future__ import annotations

from determined.tensorboard._server import READY_MESSAGE, serve, tensorboard_command
from determined.tensorboard._sync import (
    EventSync,
    Source,
    experiment_storage_path,
    run_name,
    trial_storage_path,
)

__all__ = [
    "READY_MESSAGE",
    "EventSync",
    "Source",
    "experiment_storage_path",
    "run_name",
    "serve",
    "tensorboard_command",
    "trial_storage_path",
]
