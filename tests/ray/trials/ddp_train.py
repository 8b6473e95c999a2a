"""A plain torch DDP script (gloo), run under ``python -m determined.launch.torch_distributed``.

Every rank trains the same linear model on its own data; DDP averages the gradients, so the
weights stay equal on every rank. The chief reports what the test checks: the world size, how
many nodes the ranks ran on, and whether the weights agree.
"""

import logging
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

import determined as det

STEPS = 20


def main() -> None:
    dist.init_process_group("gloo")
    rank, size = dist.get_rank(), dist.get_world_size()
    node = int(os.environ["GROUP_RANK"])
    logging.info("ddp rank %d of %d on node %d", rank, size, node)
    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Linear(4, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    data = torch.Generator().manual_seed(rank)
    distributed = det.core.DistributedContext.from_torch_distributed()
    with det.core.init(distributed=distributed) as core_context:
        for step in range(1, STEPS + 1):
            x = torch.randn(8, 4, generator=data)
            loss = torch.nn.functional.mse_loss(model(x), x.sum(1, keepdim=True))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if step % 10 == 0:
                weights = distributed.allgather(model.module.weight.detach().flatten().tolist())
                nodes = distributed.allgather(node)
                if rank == 0:
                    core_context.train.report_training_metrics(
                        steps_completed=step,
                        metrics={
                            "loss": loss.item(),
                            "world_size": size,
                            "nodes": len(set(nodes)),
                            "weights_equal": float(all(w == weights[0] for w in weights)),
                        },
                    )
        if rank == 0:
            core_context.train.report_validation_metrics(
                steps_completed=STEPS, metrics={"validation_loss": loss.item()}
            )
    dist.destroy_process_group()


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
    main()
