"""``det.pytorch.DataLoader``: a torch DataLoader recipe that det can shard, repeat and resume.

The constructor takes torch's arguments and validates them the way torch does; the real
``torch.utils.data.DataLoader`` is built by :meth:`DataLoader.get_data_loader` once det knows the
rank, the number of ranks and where training resumes.

Unlike upstream, sharding splits each *global* batch between the ranks sample by sample (see
:class:`~determined.pytorch.samplers.EpochBatchSampler`), so an epoch has the same number of steps
whatever the slot count, and resuming starts directly at the right batch of the right epoch with the
same shuffle, independent of the global RNG.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import torch
import torch.utils.data
from torch.utils.data import _utils as torch_data_utils

from determined.pytorch import samplers

logger = logging.getLogger("determined.pytorch")

TorchData = dict[str, torch.Tensor] | Sequence[torch.Tensor] | torch.Tensor
"""A batch as the training loop hands it over: tensors, or a dict/list/tuple of them."""

_Array = np.ndarray | torch.Tensor  # type: ignore[type-arg]
_Data = dict[str, _Array] | Sequence[_Array] | _Array


def dataset_repro_warning(fn: str, data_obj: Any, is_deepspeed_trial: bool = False) -> str:
    """The error for a loader builder ``fn`` that returned ``data_obj`` instead of a
    det.pytorch.DataLoader (with how to turn the check off)."""
    how = (
        "context.disable_dataset_reproducibility_checks()"
        if is_deepspeed_trial
        else "context.experimental.disable_dataset_reproducibility_checks()"
    )
    return (
        f"{fn}() returned a {type(data_obj).__name__}, not a det.pytorch.DataLoader. "
        "det.pytorch.DataLoader takes the same arguments as torch.utils.data.DataLoader and makes "
        "shuffling reproducible, sharding correct and resuming exact; use it if you can. "
        f"Otherwise call {how} in your trial's __init__()."
    )


_dataset_repro_warning = dataset_repro_warning  # the name det.pytorch exported before


class DataLoader:
    """A drop-in for ``torch.utils.data.DataLoader`` over a map-style dataset.

    Arguments are torch's. ``shuffle=True`` draws a new permutation every epoch from a seed (the
    ``generator``'s initial seed, else one drawn from torch's global RNG when training starts and
    stored in checkpoints). Iterating it directly (outside det) behaves like one epoch of the torch
    loader.
    """

    def __init__(
        self,
        dataset: torch.utils.data.Dataset,  # type: ignore[type-arg]
        batch_size: int | None = 1,
        shuffle: bool = False,
        sampler: torch.utils.data.Sampler | None = None,  # type: ignore[type-arg]
        batch_sampler: torch.utils.data.Sampler | None = None,  # type: ignore[type-arg]
        num_workers: int = 0,
        collate_fn: Callable[[list[Any]], Any] | None = None,
        pin_memory: bool = False,
        drop_last: bool = False,
        timeout: float = 0,
        worker_init_fn: Callable[[int], None] | None = None,
        multiprocessing_context: Any = None,
        generator: torch.Generator | None = None,
        *,
        prefetch_factor: int | None = None,
        persistent_workers: bool = False,
    ) -> None:
        if isinstance(dataset, torch.utils.data.IterableDataset):
            raise ValueError(
                "dataset: det.pytorch.DataLoader needs a map-style dataset, not an IterableDataset; "
                "return a torch DataLoader after context.experimental."
                "disable_dataset_reproducibility_checks() and handle sharding yourself"
            )
        if num_workers < 0:
            raise ValueError(f"num_workers: must not be negative, got {num_workers}")
        if timeout < 0:
            raise ValueError(f"timeout: must not be negative, got {timeout}")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor: only valid with num_workers > 0")
        if prefetch_factor is not None and prefetch_factor < 0:
            raise ValueError(f"prefetch_factor: must not be negative, got {prefetch_factor}")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers: needs num_workers > 0")
        if sampler is not None and shuffle:
            raise ValueError("sampler: mutually exclusive with shuffle=True")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError(
                    "batch_sampler: mutually exclusive with batch_size, shuffle, sampler and "
                    "drop_last"
                )
            batch_size = None
        elif batch_size is None:
            raise ValueError(
                "batch_size: None (no automatic batching) is not supported by "
                "det.pytorch.DataLoader; give a batch size or a batch_sampler"
            )
        elif isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size: must be a positive int, got {batch_size!r}")

        self.dataset = dataset
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.drop_last = drop_last
        self.num_workers = num_workers
        self.pin_memory = pin_memory
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.generator = generator
        self.prefetch_factor = prefetch_factor
        self.persistent_workers = persistent_workers
        self.collate_fn = collate_fn or torch_data_utils.collate.default_collate
        self._user_sampler = sampler
        self._user_batch_sampler = batch_sampler
        if sampler is None:
            sampler = (
                torch.utils.data.RandomSampler(dataset, generator=generator)  # type: ignore[arg-type]
                if shuffle
                else torch.utils.data.SequentialSampler(dataset)  # type: ignore[arg-type]
            )
        self.sampler = sampler
        if batch_sampler is None:
            assert batch_size is not None
            batch_sampler = torch.utils.data.BatchSampler(sampler, batch_size, drop_last)
        self.batch_sampler = batch_sampler
        self._shuffle_seed: int | None = None

    def _draw_seed(self) -> int:
        if self.generator is not None:
            return int(self.generator.initial_seed())
        return int(torch.randint(0, 2**62, (1,)).item())

    def _batch_sampler_for(
        self, repeat: bool, skip: int, num_replicas: int, rank: int, seed: int | None
    ) -> Any:
        if self._user_batch_sampler is not None:
            return adapt_batch_sampler(self._user_batch_sampler, repeat, skip, num_replicas, rank)
        assert self.batch_size is not None
        if self.shuffle and seed is None:
            seed = self._draw_seed()
        self._shuffle_seed = seed if self.shuffle else None
        return samplers.EpochBatchSampler(
            num_samples=len(self.dataset),  # type: ignore[arg-type]
            batch_size=self.batch_size,
            drop_last=self.drop_last,
            shuffle=self.shuffle,
            seed=seed or 0,
            num_replicas=num_replicas,
            rank=rank,
            repeat=repeat,
            start=skip,
            sampler=self._user_sampler,
        )

    def get_data_loader(
        self, repeat: bool = False, skip: int = 0, num_replicas: int = 1, rank: int = 0
    ) -> torch.utils.data.DataLoader:  # type: ignore[type-arg]
        """The torch DataLoader for one rank: ``skip`` global batches in, repeating if asked."""
        return self._get_data_loader(repeat, skip, num_replicas, rank, None)

    def _get_data_loader(
        self, repeat: bool, skip: int, num_replicas: int, rank: int, seed: int | None
    ) -> torch.utils.data.DataLoader:  # type: ignore[type-arg]
        batch_sampler = self._batch_sampler_for(repeat, skip, num_replicas, rank, seed)
        return torch.utils.data.DataLoader(
            self.dataset,
            batch_sampler=batch_sampler,
            num_workers=self.num_workers,
            collate_fn=self.collate_fn,
            pin_memory=self.pin_memory,
            timeout=self.timeout,
            worker_init_fn=self.worker_init_fn,
            multiprocessing_context=self.multiprocessing_context,
            generator=self.generator,
            prefetch_factor=self.prefetch_factor,
            persistent_workers=self.persistent_workers,
        )

    def __iter__(self) -> Iterator[Any]:
        """One epoch, as a torch DataLoader would give it (for use outside det)."""
        return iter(self.get_data_loader())

    def __len__(self) -> int:
        """Batches per epoch on one rank."""
        return len(self.batch_sampler)  # type: ignore[arg-type]


def adapt_batch_sampler(
    batch_sampler: Any, repeat: bool = False, skip: int = 0, num_replicas: int = 1, rank: int = 0
) -> Any:
    """Upstream's adaptation of a custom batch sampler: repeat, then shard whole batches
    round-robin between ranks, then skip ``skip`` of this rank's batches."""
    if repeat:
        batch_sampler = samplers.RepeatBatchSampler(batch_sampler)
    if num_replicas > 1:
        batch_sampler = samplers.DistributedBatchSampler(batch_sampler, num_replicas, rank)
    if skip > 0:
        batch_sampler = samplers.SkipBatchSampler(batch_sampler, skip)
    return batch_sampler


def data_length(data: _Data) -> int:
    """The number of records in a batch: the length of its first array leaf."""
    if isinstance(data, (np.ndarray, torch.Tensor)):
        return len(data)
    if isinstance(data, dict):
        if not data:
            raise ValueError("data_length: an empty dict has no length")
        return data_length(next(iter(data.values())))
    if isinstance(data, (list, tuple)):
        if not data:
            raise ValueError(f"data_length: an empty {type(data).__name__} has no length")
        return data_length(data[0]) if isinstance(data[0], (dict, list, tuple)) else len(data[0])
    raise TypeError(f"data_length: cannot find the length of a {type(data).__name__}")


def _on_cpu_already(data: Any) -> bool:
    """Whether ``data`` is a CPU tensor or a flat list/tuple of them (the common batch)."""
    kind = type(data)
    if kind is torch.Tensor:
        return data.is_cpu
    if kind is list or kind is tuple:
        for item in data:  # noqa: SIM110 (a loop, not all(<genexpr>): runs once per batch)
            if type(item) is not torch.Tensor or not item.is_cpu:
                return False
        return True
    return False


def to_device(data: Any, device: torch.device | str, warned_types: set[type] | None = None) -> Any:
    """``data`` on ``device``: recurses into dicts, lists and tuples, turns numeric NumPy arrays
    into tensors and calls ``.to(device)`` on anything that has it; warns once per other type."""
    if isinstance(data, torch.Tensor):
        return data.to(device)
    if isinstance(data, dict):
        return {k: to_device(v, device, warned_types) for k, v in data.items()}
    if isinstance(data, list):
        return [to_device(v, device, warned_types) for v in data]
    if isinstance(data, tuple):
        items = [to_device(v, device, warned_types) for v in data]
        return type(data)(*items) if hasattr(data, "_fields") else tuple(items)
    if isinstance(data, np.ndarray):
        if data.dtype.kind in "fciub":
            return torch.from_numpy(data).to(device)
    elif callable(getattr(data, "to", None)):
        return data.to(device)
    if warned_types is None:
        warned_types = set()
    if type(data) not in warned_types:
        warned_types.add(type(data))
        logger.warning("was not able to move data of type %r to device", type(data).__name__)
    return data
