"""``ModelParallelUnit``: which ranks build data loaders and report metrics, and how data is sharded.

Plain data parallelism (the default) shards data over every rank. With pipeline or other model
parallelism only some ranks read data and compute the loss; their data-parallel rank and world size
decide the sharding.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from determined import core


@dataclasses.dataclass
class ModelParallelUnit:
    """The parallel topology the training loop needs to know; pass one to ``context.set_mpu()``
    for model parallelism DeepSpeed does not describe itself.

    Attributes:
        data_parallel_rank: this rank's index among the data-parallel replicas (shards the data).
        data_parallel_world_size: the number of data-parallel replicas.
        should_report_metrics: whether this rank's training/validation metrics count (typically
            the ranks of the last pipeline stage).
        should_build_data_loader: whether this rank reads data (typically the first and last
            pipeline stages).
    """

    data_parallel_rank: int
    data_parallel_world_size: int
    should_report_metrics: bool
    should_build_data_loader: bool

    def __post_init__(self) -> None:
        if self.data_parallel_world_size < 1:
            raise ValueError(
                "ModelParallelUnit.data_parallel_world_size: must be at least 1, got "
                f"{self.data_parallel_world_size}"
            )
        if not 0 <= self.data_parallel_rank < self.data_parallel_world_size:
            raise ValueError(
                f"ModelParallelUnit.data_parallel_rank: {self.data_parallel_rank} is out of range "
                f"for data_parallel_world_size={self.data_parallel_world_size}"
            )


def make_data_parallel_mpu(dist_context: core.DistributedContext) -> ModelParallelUnit:
    """Pure data parallelism: every rank reads its shard and reports metrics."""
    return ModelParallelUnit(
        data_parallel_rank=dist_context.get_rank(),
        data_parallel_world_size=dist_context.get_size(),
        should_report_metrics=True,
        should_build_data_loader=True,
    )


def make_deepspeed_mpu(topology: Any) -> ModelParallelUnit:
    """From a DeepSpeed ``PipelineParallelGrid`` (``engine.mpu`` of a PipelineEngine): data is read
    on the first slice of the first and last pipeline stages, sharded over data-parallel ranks."""
    stage = topology.get_pipe_parallel_rank()
    last_stage = topology.get_pipe_parallel_world_size() - 1
    return ModelParallelUnit(
        data_parallel_rank=topology.get_data_parallel_rank(),
        data_parallel_world_size=topology.get_data_parallel_world_size(),
        should_report_metrics=True,
        should_build_data_loader=topology.get_slice_parallel_rank() == 0
        and stage in (0, last_stage),
    )
