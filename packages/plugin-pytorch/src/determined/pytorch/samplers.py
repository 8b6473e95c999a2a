"""Samplers that make data loading reproducible, sharded and resumable.

``det.pytorch.DataLoader`` uses :class:`EpochBatchSampler` for its default samplers: the order of
every epoch is a pure function of ``(seed, epoch)``, each global batch is split between the ranks
sample by sample, and training can start at any global batch without replaying earlier ones. The
other classes are upstream's building blocks (repeat, shard, skip, shuffle), kept for custom
samplers and for code that imports them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence, Sized
from typing import Any

import numpy as np
import torch
import torch.utils.data


def _len(obj: Any) -> int:
    if not isinstance(obj, Sized):
        raise TypeError(f"{type(obj).__name__} has no len()")
    return len(obj)


class RepeatSampler(torch.utils.data.Sampler):  # type: ignore[type-arg]
    """Repeats ``sampler`` forever; ``len()`` is one pass."""

    def __init__(self, sampler: Iterable[Any]) -> None:
        self._sampler = sampler

    def __len__(self) -> int:
        return _len(self._sampler)

    def __iter__(self) -> Iterator[Any]:
        while True:
            yield from self._sampler


class RepeatBatchSampler(torch.utils.data.BatchSampler):
    """Repeats ``batch_sampler`` forever; ``len()`` is one pass."""

    def __init__(self, batch_sampler: Iterable[list[int]]) -> None:
        self.batch_sampler = batch_sampler

    def __len__(self) -> int:
        return _len(self.batch_sampler)

    def __iter__(self) -> Iterator[list[int]]:
        while True:
            yield from self.batch_sampler


class DistributedSampler(torch.utils.data.Sampler):  # type: ignore[type-arg]
    """Every ``num_workers``-th item of ``sampler``, starting at ``rank``."""

    def __init__(self, sampler: Iterable[Any], num_workers: int, rank: int) -> None:
        _check_rank(num_workers, rank)
        self._sampler = sampler
        self._num_workers = num_workers
        self._rank = rank

    def __len__(self) -> int:
        total = _len(self._sampler)
        return total // self._num_workers + int(total % self._num_workers > self._rank)

    def __iter__(self) -> Iterator[Any]:
        for i, item in enumerate(self._sampler):
            if i % self._num_workers == self._rank:
                yield item


class DistributedBatchSampler(torch.utils.data.BatchSampler):
    """Round-robin whole batches of ``batch_sampler`` between ranks (upstream's sharding)."""

    def __init__(self, batch_sampler: Iterable[list[int]], num_workers: int, rank: int) -> None:
        _check_rank(num_workers, rank)
        self.batch_sampler = batch_sampler
        self.num_workers = num_workers
        self.rank = rank

    def __len__(self) -> int:
        total = _len(self.batch_sampler)
        return total // self.num_workers + int(total % self.num_workers > self.rank)

    def __iter__(self) -> Iterator[list[int]]:
        for i, batch in enumerate(self.batch_sampler):
            if i % self.num_workers == self.rank:
                yield batch


class SkipSampler(torch.utils.data.Sampler):  # type: ignore[type-arg]
    """Drops the first ``skip`` items of ``sampler``."""

    def __init__(self, sampler: Iterable[Any], skip: int) -> None:
        self._sampler = sampler
        self._skip = skip

    def __len__(self) -> int:
        return _len(self._sampler)

    def __iter__(self) -> Iterator[Any]:
        iterator = iter(self._sampler)
        for _ in range(self._skip):
            if next(iterator, _END) is _END:
                return
        yield from iterator


class SkipBatchSampler(torch.utils.data.BatchSampler):
    """Drops the first ``skip`` batches of ``batch_sampler``."""

    def __init__(self, batch_sampler: Iterable[list[int]], skip: int) -> None:
        self.batch_sampler = batch_sampler
        self.skip = skip

    def __len__(self) -> int:
        return _len(self.batch_sampler)

    @property
    def length(self) -> int:
        """Upstream's attribute: the wrapped sampler's length (read when asked, so an unsized
        sampler still wraps)."""
        return _len(self.batch_sampler)

    def __iter__(self) -> Iterator[list[int]]:
        iterator = iter(self.batch_sampler)
        for _ in range(self.skip):
            if next(iterator, _END) is _END:
                return
        yield from iterator


class ReproducibleShuffleSampler(torch.utils.data.Sampler):  # type: ignore[type-arg]
    """Shuffles each pass over ``sampler`` with a NumPy generator seeded once with ``seed``."""

    def __init__(self, sampler: Iterable[Any], seed: int) -> None:
        self._sampler = sampler
        self._rng = np.random.RandomState(seed)

    def __len__(self) -> int:
        return _len(self._sampler)

    def __iter__(self) -> Iterator[Any]:
        items = list(self._sampler)
        self._rng.shuffle(items)
        return iter(items)


class ReproducibleShuffleBatchSampler(torch.utils.data.Sampler):  # type: ignore[type-arg]
    """Shuffles the order of the batches of each pass over ``batch_sampler``."""

    def __init__(self, batch_sampler: Iterable[list[int]], seed: int) -> None:
        self._batch_sampler = batch_sampler
        self._rng = np.random.RandomState(seed)

    def __len__(self) -> int:
        return _len(self._batch_sampler)

    def __iter__(self) -> Iterator[list[int]]:
        batches = list(self._batch_sampler)
        self._rng.shuffle(batches)
        return iter(batches)


class EpochBatchSampler(torch.utils.data.BatchSampler):
    """This rank's share of each global batch, epoch after epoch, starting at any global batch.

    A global batch holds ``batch_size * num_replicas`` samples; rank ``r`` takes every
    ``num_replicas``-th sample of it starting at ``r``, so the data seen per step does not depend on
    how many ranks share it, and the position is just a count of global batches.

    Args:
        num_samples: the dataset's length.
        batch_size: samples per batch on each rank.
        drop_last: drop the last global batch of an epoch when it is incomplete.
        shuffle: draw a fresh permutation for each epoch from ``seed`` and the epoch number.
        seed: the shuffle seed (ignored without ``shuffle``).
        num_replicas: the number of ranks sharing each global batch.
        rank: this rank.
        repeat: go on to the next epoch forever (training) instead of stopping after one.
        start: the global batch to start at (the number already trained).
        sampler: a sampler whose order to use instead of range/permutation (one pass per epoch).
    """

    def __init__(
        self,
        num_samples: int,
        batch_size: int,
        drop_last: bool = False,
        shuffle: bool = False,
        seed: int = 0,
        num_replicas: int = 1,
        rank: int = 0,
        repeat: bool = False,
        start: int = 0,
        sampler: Iterable[int] | None = None,
    ) -> None:
        _check_rank(num_replicas, rank)
        if batch_size < 1:
            raise ValueError(f"batch_size: must be at least 1, got {batch_size}")
        if start < 0:
            raise ValueError(f"start: must not be negative, got {start}")
        self.num_samples = int(num_samples)
        self.batch_size = int(batch_size)
        self.drop_last = bool(drop_last)
        self.shuffle = bool(shuffle)
        self.seed = int(seed)
        self.num_replicas = int(num_replicas)
        self.rank = int(rank)
        self.repeat = bool(repeat)
        self.start = int(start)
        self.sampler = sampler
        self.global_batch_size = self.batch_size * self.num_replicas

    def __len__(self) -> int:
        """Global batches per epoch (every rank gets one batch of each)."""
        full, rest = divmod(self.num_samples, self.global_batch_size)
        return full if self.drop_last or rest == 0 else full + 1

    def epoch_order(self, epoch: int) -> Sequence[int]:
        """The order of the samples in ``epoch`` (the same on every rank)."""
        if self.sampler is not None:
            return list(self.sampler)
        if not self.shuffle:
            return range(self.num_samples)
        generator = torch.Generator()
        generator.manual_seed((self.seed * 1_000_003 + epoch) % (1 << 63))
        return torch.randperm(self.num_samples, generator=generator).tolist()

    def __iter__(self) -> Iterator[list[int]]:
        per_epoch = len(self)
        if per_epoch == 0:
            return
        epoch, offset = divmod(self.start, per_epoch)
        gbs, n, rank = self.global_batch_size, self.num_replicas, self.rank
        while True:
            order = self.epoch_order(epoch)
            for index in range(offset, per_epoch):
                chunk = order[index * gbs : (index + 1) * gbs]
                share = list(chunk[rank::n])
                if not share:
                    if not self.repeat:
                        continue  # validation: this rank has no sample in the last global batch
                    # training: every rank must step, so borrow from the start of the epoch
                    share = [order[rank % len(order)]]
                yield share
            if not self.repeat:
                return
            epoch, offset = epoch + 1, 0


class _End:
    pass


_END = _End()


def _check_rank(num_replicas: int, rank: int) -> None:
    if num_replicas < 1:
        raise ValueError(f"num_replicas: must be at least 1, got {num_replicas}")
    if not 0 <= rank < num_replicas:
        raise ValueError(f"rank: must be in [0, {num_replicas}), got {rank}")
