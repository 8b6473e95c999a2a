"""Stage 4: distributed training with one process per slot.

Launch it with ``python3 -m determined.launch.torch_distributed python3 4_distributed.py``: every rank
trains on its own data shard, the ranks average their parameters each step with ``allgather``, and only
the chief reports metrics and saves checkpoints. With plain ``python`` it runs as a single rank.
"""

import json
import logging
import os

from model import LinearModel

import determined as det


def main(core_context: det.core.Context, steps: int = 50) -> None:
    dist = core_context.distributed
    logging.info("rank %d of %d (local rank %d) ready", dist.rank, dist.size, dist.local_rank)
    model = LinearModel(seed=dist.rank)
    for step in range(1, steps + 1):
        loss = model.train_batch()
        # Average parameters and losses across ranks (a stand-in for gradient all-reduce).
        states = dist.allgather((model.w, model.b, loss))
        model.w = sum(s[0] for s in states) / len(states)
        model.b = sum(s[1] for s in states) / len(states)
        mean_loss = sum(s[2] for s in states) / len(states)
        if dist.rank == 0 and step % 10 == 0:
            core_context.train.report_training_metrics(
                steps_completed=step, metrics={"loss": mean_loss, "ranks": len(states)}
            )
    if dist.rank == 0:
        with core_context.checkpoint.store_path({"steps_completed": steps}) as (path, _):
            (path / "model.json").write_text(json.dumps(model.state()))
        core_context.train.report_validation_metrics(
            steps_completed=steps, metrics={"validation_loss": model.validate()}
        )


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
    distributed = None  # plain `python 4_distributed.py`: one rank
    if "RANK" in os.environ:  # started by torch.distributed (the torch_distributed launcher)
        distributed = det.core.DistributedContext.from_torch_distributed()
    with det.core.init(distributed=distributed) as core_context:
        main(core_context)
