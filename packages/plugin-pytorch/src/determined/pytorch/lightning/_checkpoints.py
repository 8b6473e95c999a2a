"""Lightning checkpoints in det storage: writing one, and fetching one to resume from.

A det checkpoint written by DetCallback holds the Lightning checkpoint as ``CHECKPOINT_FILE`` and
det metadata (``steps_completed`` = ``global_step``, ``epoch``, ``format``, ``framework``).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import logging
import pathlib
from typing import TYPE_CHECKING

import pytorch_lightning as pl

if TYPE_CHECKING:
    import determined as det

logger = logging.getLogger("determined.pytorch.lightning")

CHECKPOINT_FILE = "model.ckpt"
"""The Lightning checkpoint inside a det checkpoint (``Module.load_from_checkpoint(dir / this)``)."""

_LIGHTNING_VERSION = importlib.metadata.version("pytorch-lightning")


def store_checkpoint(core_context: det.core.Context, trainer: pl.Trainer) -> int:
    """Write the trainer's Lightning checkpoint into det storage; return its step.

    Every rank calls it in step: Lightning writes on the global-zero rank only, the others take part.
    """
    step = int(trainer.global_step)
    metadata = {
        "steps_completed": step,
        "epoch": int(trainer.current_epoch),
        "format": "pytorch-lightning",
        "framework": f"pytorch-lightning {_LIGHTNING_VERSION}",
        "checkpoint_file": CHECKPOINT_FILE,
    }
    shard = core_context.distributed.size > 1
    with core_context.checkpoint.store_path(metadata, shard=shard) as (path, storage_id):
        trainer.save_checkpoint(pathlib.Path(path) / CHECKPOINT_FILE, weights_only=False)
    logger.info("checkpoint %s saved at step %d", storage_id, step)
    return step


def fetch_checkpoint(
    core_context: det.core.Context, storage_id: str, keep_open: contextlib.ExitStack
) -> str:
    """The local path of the Lightning checkpoint in det checkpoint ``storage_id``.

    The download stays until ``keep_open`` closes. FileNotFoundError when the det checkpoint was
    not written by DetCallback.
    """
    path = keep_open.enter_context(core_context.checkpoint.restore_path(storage_id))
    ckpt = pathlib.Path(path) / CHECKPOINT_FILE
    if not ckpt.is_file():
        keep_open.close()
        raise FileNotFoundError(
            f"latest_checkpoint: det checkpoint {storage_id} holds no "
            f"{CHECKPOINT_FILE} (it was not written by DetCallback)"
        )
    logger.info("resuming from det checkpoint %s", storage_id)
    return str(ckpt)
