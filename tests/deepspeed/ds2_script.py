"""Run under ``python -m determined.launch.deepspeed``: the small trial on every rank, ZeRO 0, 2, 3.

For each stage: straight through, stopped by rank 1's request, and resumed from that checkpoint.
Each rank writes what it saw to ``<out>/rank<r>.json``.
"""

from __future__ import annotations

import json
import logging
import os
import pathlib
import sys
from typing import Any

import lintrial

from determined import pytorch
from determined.pytorch import deepspeed as det_ds

# The periods test_master's experiments get from their legacy config fields.
FIT: dict[str, Any] = {
    "max_length": pytorch.Batch(12),
    "reporting_period": pytorch.Batch(2),
    "validation_period": pytorch.Batch(4),
    "checkpoint_period": pytorch.Batch(4),
    "checkpoint_policy": "none",
}


def run(stage: int, storage: str, **fit: Any) -> dict[str, Any]:
    hparams = {**lintrial.HPARAMS, "stage": stage, **fit.pop("hparams", {})}
    with det_ds.init(
        hparams=hparams,
        exp_conf={"reproducibility": {"experiment_seed": 7}},
        checkpoint_storage=storage,
        enable_tensorboard_logging=False,
    ) as context:
        trial = lintrial.LinTrial(context)
        det_ds.Trainer(trial, context).fit(**FIT, **fit)
        return {
            "size": context.distributed.size,
            "rank": context.distributed.rank,
            "gas": context.get_num_micro_batches_per_slot(),
            "global_batch_size": context.get_global_batch_size(),
            "weights": lintrial.weights(trial),
            "steps": list(dict.fromkeys(trial.calls)),
            "workloads": trial.recorder.workloads,
            "validations": trial.recorder.validations,
            "uuid": context.distributed.broadcast(trial.recorder.uuids[-1]),
        }


def main(out: pathlib.Path) -> None:
    logging.basicConfig(level=logging.WARNING)
    storage = str(out / "ckpt")
    result: dict[str, Any] = {
        "env": {k: os.environ.get(k) for k in ("USE_DEEPSPEED", "LOCAL_SIZE")}
    }
    for stage in (0, 2, 3):
        straight = run(stage, storage)
        stopped = run(stage, storage, hparams={"stop_at": 4, "stop_rank": 1})
        resumed = run(stage, storage, latest_checkpoint=stopped["uuid"])
        result[str(stage)] = {"straight": straight, "stopped": stopped, "resumed": resumed}
    rank = result["0"]["straight"]["rank"]
    (out / f"rank{rank}.json").write_text(json.dumps(result))


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1]))
