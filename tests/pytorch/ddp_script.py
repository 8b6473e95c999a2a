"""Run under ``python -m determined.launch.torch_distributed``: the one-variable trial with DDP.

Three trainings in one pair of processes: straight through, stopped by one rank's request, and
resumed from that checkpoint. Each rank writes what it saw to ``<out>/rank<r>.json``.
"""

from __future__ import annotations

import json
import logging
import pathlib
import sys

import onevar
import torch
import torch.distributed

from determined import pytorch

HPARAMS = {"global_batch_size": 4, "lr": 0.05, "dataset_len": 20, "shuffle": True, "val_len": 10}
FIT = {
    "max_length": pytorch.Batch(12),
    "reporting_period": pytorch.Batch(3),
    "validation_period": pytorch.Batch(6),
    "checkpoint_policy": "none",
}


class StopOnRankOne(onevar.OneVarTrial):
    """Only rank 1 asks to stop (after batch 4): every rank must stop at the same boundary."""

    def train_batch(self, batch, epoch_idx, batch_idx):  # type: ignore[no-untyped-def]
        out = super().train_batch(batch, epoch_idx, batch_idx)
        if batch_idx == 3 and self.context.distributed.rank == 1:
            self.context.set_stop_requested(True)
        return out


def run(trial_class: type, storage: str, **fit: object) -> dict[str, object]:
    with pytorch.init(
        hparams=HPARAMS,
        exp_conf={"reproducibility": {"experiment_seed": 3}},
        checkpoint_storage=storage,
        enable_tensorboard_logging=False,
    ) as context:
        trial = trial_class(context)
        pytorch.Trainer(trial, context).fit(**FIT, **fit)  # type: ignore[arg-type]
        uuid = context.distributed.broadcast(
            trial.counter.uuids[-1] if trial.counter.uuids else None
        )
        return {
            "ddp": isinstance(trial.model, torch.nn.parallel.DistributedDataParallel),
            "size": context.distributed.size,
            "weight": trial.model.weight.item(),
            "batches": trial.counter.batch_metrics,
            "workloads": trial.counter.workload_metrics,
            "validations": trial.counter.validation_metrics,
            "uuid": uuid,
        }


def main(out: pathlib.Path) -> None:
    logging.basicConfig(level=logging.WARNING)
    torch.distributed.init_process_group("gloo")
    rank = torch.distributed.get_rank()
    storage = str(out / "ckpt")
    straight = run(onevar.OneVarTrial, storage)
    stopped = run(StopOnRankOne, storage)
    resumed = run(onevar.OneVarTrial, storage, latest_checkpoint=stopped["uuid"])
    result = {"straight": straight, "stopped": stopped, "resumed": resumed}
    (out / f"rank{rank}.json").write_text(json.dumps(result))
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1]))
