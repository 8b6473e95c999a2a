"""Upstream's examples/features/unmanaged/3_torch_distributed.py, det's own copy: two torch
processes (gloo) report as one unmanaged trial; each rank writes its shard of every checkpoint.

Usage: python -m torch.distributed.run --nproc_per_node=2 ... torch_distributed.py NAME STORAGE
"""

import random
import sys

import torch.distributed as dist

from determined.experimental import core_v2


def main() -> None:
    dist.init_process_group("gloo")
    distributed = core_v2.DistributedContext.from_torch_distributed()
    core_v2.init(
        config=core_v2.Config(name=sys.argv[1], checkpoint_storage=sys.argv[2]),
        distributed=distributed,
    )
    size, rank = dist.get_world_size(), dist.get_rank()
    for i in range(10):
        if i % size == rank:
            core_v2.train.report_training_metrics(
                steps_completed=i, metrics={"loss": random.random(), "rank": rank + 0.01}
            )
        if (i + 1) % 5 == 0:
            metadata = {"steps_completed": i, f"rank_{rank}": "ok"}
            with core_v2.checkpoint.store_path(metadata, shard=True) as (path, _uuid):
                (path / f"state_{rank}").write_text(f"{i},{rank}")
    if rank == 0:
        print("experiment id:", core_v2.info.trial.experiment_id, flush=True)
    core_v2.close()
    distributed.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
