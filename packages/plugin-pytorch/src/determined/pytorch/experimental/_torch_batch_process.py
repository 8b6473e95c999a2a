"""``torch_batch_process``: run a :class:`TorchBatchProcessor` over a dataset on every rank, with
progress that survives a restart.

The dataset is sharded between the ranks with det's :class:`~determined.pytorch.DataLoader` (each
global batch split sample by sample, so every rank runs the same number of batches and a position
is one count). Every ``checkpoint_interval`` batches each rank calls ``on_checkpoint_start``, the
chief stores a checkpoint whose metadata records ``steps_completed`` (batches done per rank) and
the output id, and the job honours preemption. A restarted trial reads its latest checkpoint and
skips what was done.

Differences from upstream 0.38, on purpose:

- it runs off-cluster too (single process, or under ``torchrun``), from batch 0;
- the shard count is the number of processes (upstream multiplied the cluster's slot counts, which
  mis-sharded when a launcher ran a different number of processes);
- progress reaches the master (upstream reported it to a placeholder searcher operation only), and
  never exceeds 1 (upstream's formula used the batch index, and over-counted a short last batch).
"""

from __future__ import annotations

import json
import logging
import os
import uuid
import warnings
from collections.abc import Sized
from typing import Any

import torch
import torch.distributed

import determined as det
from determined import core
from determined.pytorch._data import DataLoader
from determined.pytorch._trainer import _init_process_group
from determined.pytorch.experimental._batch_processor import (
    TorchBatchProcessor,
    TorchBatchProcessorContext,
    default_storage_config,
    storage_manager_for,
)

logger = logging.getLogger("determined.pytorch")

DEFAULT_BATCH_SIZE = 1
PROGRESS_FILE = "batch_completed.json"
_FORBIDDEN_LOADER_ARGS = {
    "sampler": "torch_batch_process shards the dataset itself: remove 'sampler'",
    "batch_sampler": "torch_batch_process shards the dataset itself: remove 'batch_sampler'",
}


def _batch_size(dataloader_kwargs: dict[str, Any], batch_size: int | None) -> int:
    """The batch size, taken out of ``dataloader_kwargs`` when given there; checks the kwargs."""
    if dataloader_kwargs.get("shuffle"):
        raise ValueError("shuffle: must be False, so that shards and checkpoints line up")
    dataloader_kwargs.pop("shuffle", None)
    for name, message in _FORBIDDEN_LOADER_ARGS.items():
        if name in dataloader_kwargs:
            raise ValueError(message)
    if "batch_size" in dataloader_kwargs:
        if batch_size is not None:
            raise ValueError(
                "batch_size: given both to torch_batch_process and in dataloader_kwargs"
            )
        batch_size = dataloader_kwargs.pop("batch_size")
    if batch_size is None:
        return DEFAULT_BATCH_SIZE
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size: must be a positive int, got {batch_size!r}")
    return batch_size


def _batches_to_run(max_batches: int | None, batches_per_rank: int) -> int:
    """How many batches each rank runs: ``max_batches`` when it is a sensible limit."""
    if max_batches is None:
        return batches_per_rank
    if max_batches <= 0 or max_batches > batches_per_rank:
        warnings.warn(
            f"max_batches={max_batches} is not in [1, {batches_per_rank}] (this shard's batch "
            "count): processing the whole dataset once",
            stacklevel=3,
        )
        return batches_per_rank
    return max_batches


def _check_launcher(info: det.ClusterInfo | None) -> None:
    """A multi-slot trial must run under a launcher, or every process would take the whole data."""
    if info is None or "RANK" in os.environ:
        return
    if len(info.container_addrs) > 1 or len(info.slot_ids) > 1:
        raise ValueError(
            "torch_batch_process on several slots needs a distributed launcher: start the "
            "script with python3 -m determined.launch.torch_distributed python3 <script>"
        )


def _restore_progress(core_context: core.Context, info: det.ClusterInfo | None) -> tuple[int, str]:
    """``(batches already done per rank, output id)``: from the latest checkpoint, else fresh.

    Every rank calls: the chief draws the fresh output id, and every rank reads the checkpoint
    (``restore_path`` is a collective of the ranks sharing a machine).
    """
    distributed = core_context.distributed
    fresh = distributed.broadcast(str(uuid.uuid4()) if distributed.rank == 0 else None)
    latest = info.latest_checkpoint if info is not None else None
    if latest is None:
        return 0, str(fresh)
    with core_context.checkpoint.restore_path(latest) as path:
        metadata = json.loads((path / "metadata.json").read_text())
    skip = int(metadata.get("steps_completed") or 0)
    if distributed.rank == 0:
        logger.info("torch_batch_process: resuming after %d batches (checkpoint %s)", skip, latest)
    return skip, str(metadata.get("default_output_uuid") or fresh)


def _checkpoint(core_context: core.Context, steps_completed: int, output_id: str) -> None:
    """Every rank calls; the chief stores a checkpoint of the batches all ranks have done."""
    distributed = core_context.distributed
    done = distributed.gather(steps_completed)
    if done is None:
        return
    batches = min(done)
    metadata = {"steps_completed": batches, "default_output_uuid": output_id}
    with core_context.checkpoint.store_path(metadata) as (path, storage_id):
        (path / PROGRESS_FILE).write_text(json.dumps({"batch_completed": batches}))
    logger.info(
        "torch_batch_process: reported a checkpoint of %d batches (%s)", batches, storage_id
    )


def _report_reduced_metrics(
    context: TorchBatchProcessorContext, core_context: core.Context, steps_completed: int
) -> None:
    """Reduce the wrapped reducers across ranks (every rank calls); the chief reports them."""
    if not context._has_reducers(for_training=False):
        return
    metrics = context.reduce_metrics(for_training=False)
    if core_context.distributed.rank == 0 and metrics:
        core_context.train.report_validation_metrics(steps_completed, metrics)


def _report_progress(core_context: core.Context, done: int, total: int) -> None:
    if core_context.distributed.rank == 0:
        core_context.train.report_progress(min(1.0, done / total) if total else 1.0)


def torch_batch_process(
    batch_processor_cls: type[TorchBatchProcessor],
    dataset: torch.utils.data.Dataset,  # type: ignore[type-arg]
    batch_size: int | None = None,
    max_batches: int | None = None,
    checkpoint_interval: int = 5,
    dataloader_kwargs: dict[str, Any] | None = None,
    distributed_context: core.DistributedContext | None = None,
) -> None:
    """Shard ``dataset`` over the ranks and run ``batch_processor_cls`` on every batch, resumably.

    Args:
        batch_processor_cls: a :class:`TorchBatchProcessor` subclass; each rank creates one.
        dataset: a map-style dataset (``__len__`` and ``__getitem__``).
        batch_size: items per batch on each rank (default 1, or ``dataloader_kwargs["batch_size"]``).
        max_batches: process at most this many batches per rank.
        checkpoint_interval: record progress every this many batches per rank.
        dataloader_kwargs: other :class:`det.pytorch.DataLoader` arguments (``num_workers``,
            ``collate_fn``, ``drop_last``...); no ``shuffle``, ``sampler`` or ``batch_sampler``.
        distributed_context: the DistributedContext to use; by default the launcher's environment
            decides (``determined.launch.torch_distributed`` gives one rank per slot).
    """
    if isinstance(checkpoint_interval, bool) or not isinstance(checkpoint_interval, int):
        raise ValueError(
            f"checkpoint_interval: must be a positive int, got {checkpoint_interval!r}"
        )
    if checkpoint_interval <= 0:
        raise ValueError(f"checkpoint_interval: must be positive, got {checkpoint_interval}")
    loader_kwargs = dict(dataloader_kwargs or {})
    per_batch = _batch_size(loader_kwargs, batch_size)
    if not isinstance(dataset, Sized):
        raise TypeError("dataset: must implement __len__() (a map-style dataset)")
    if not logging.getLogger().handlers:
        # A plain script logs nothing below WARNING: show progress, as upstream's import did.
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    info = det.get_cluster_info()
    _check_launcher(info if distributed_context is None else None)
    storage = default_storage_config(info)
    owns_process_group = distributed_context is None and _init_process_group(
        torch.cuda.device_count()
    )
    try:
        with det.core.init(
            distributed=distributed_context,
            checkpoint_storage=None if isinstance(storage, dict) else storage,
            preempt_mode=core.PreemptMode.WorkersAskChief,
        ) as core_context:
            _run(
                core_context,
                info,
                batch_processor_cls,
                DataLoader(dataset, batch_size=per_batch, shuffle=False, **loader_kwargs),
                max_batches,
                checkpoint_interval,
                storage,
            )
    finally:
        if owns_process_group and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()


def _run(
    core_context: core.Context,
    info: det.ClusterInfo | None,
    batch_processor_cls: type[TorchBatchProcessor],
    data: DataLoader,
    max_batches: int | None,
    checkpoint_interval: int,
    storage: str | dict[str, Any],
) -> None:
    rank, size = core_context.distributed.rank, core_context.distributed.size
    skip, output_id = _restore_progress(core_context, info)
    context = TorchBatchProcessorContext(core_context, f"{output_id}/rank_{rank}")
    context._storage_manager = storage_manager_for(storage)
    processor = batch_processor_cls(context=context)

    loader = data.get_data_loader(repeat=False, skip=skip, num_replicas=size, rank=rank)
    # Every rank runs the same count (a rank with no item in the last global batch gets None
    # from its iterator), so the collectives below always pair up.
    total = _batches_to_run(max_batches, len(loader.batch_sampler))  # type: ignore[arg-type]
    batches = iter(loader)
    steps_completed = skip
    checkpointed: int | None = skip if skip else None
    for batch_idx in range(skip, total):
        batch = next(batches, None)
        if batch is not None:
            processor.process_batch(batch=batch, batch_idx=batch_idx)
        steps_completed = batch_idx + 1
        if steps_completed % checkpoint_interval:
            continue
        processor.on_checkpoint_start()
        _checkpoint(core_context, steps_completed, output_id)
        checkpointed = steps_completed
        _report_progress(core_context, steps_completed, total)
        if core_context.preempt.should_preempt():
            _report_reduced_metrics(context, core_context, steps_completed)
            logger.info("torch_batch_process: preempted after %d batches", steps_completed)
            return

    if checkpointed != steps_completed:
        processor.on_checkpoint_start()
        _checkpoint(core_context, steps_completed, output_id)
    _report_reduced_metrics(context, core_context, steps_completed)
    processor.on_finish()
    if rank == 0 and context._use_default_storage:
        logger.info(
            "torch_batch_process: files of upload_path() are in %r under %s/rank_<rank>",
            context._storage_manager,
            output_id,
        )
    core_context.distributed.allgather(None)  # every rank finished before the job says so
    _report_progress(core_context, total, total)
    logger.info("torch_batch_process: done, %d batches per rank", steps_completed)
