"""det.pytorch.DataLoader and samplers: reproducible shuffles, sample-level sharding, resume skips."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from determined import pytorch
from determined.pytorch import samplers


def _take(iterator: Any, n: int) -> list[list[int]]:
    return [next(iterator) for _ in range(n)]


def test_epoch_order_depends_on_seed_and_epoch_only() -> None:
    sampler = samplers.EpochBatchSampler(10, 3, shuffle=True, seed=5, repeat=True)
    again = samplers.EpochBatchSampler(10, 3, shuffle=True, seed=5, repeat=True)
    assert list(sampler.epoch_order(0)) == list(again.epoch_order(0))
    assert sorted(sampler.epoch_order(1)) == list(range(10))
    assert list(sampler.epoch_order(0)) != list(sampler.epoch_order(1))
    torch.manual_seed(0)  # the global RNG plays no part
    assert list(samplers.EpochBatchSampler(10, 3, shuffle=True, seed=5).epoch_order(0)) == list(
        sampler.epoch_order(0)
    )


def test_start_skips_exactly_that_many_global_batches() -> None:
    full = _take(iter(samplers.EpochBatchSampler(10, 3, shuffle=True, seed=1, repeat=True)), 12)
    for start in (0, 2, 4, 7):
        resumed = iter(
            samplers.EpochBatchSampler(10, 3, shuffle=True, seed=1, repeat=True, start=start)
        )
        assert _take(resumed, 12 - start) == full[start:]


@pytest.mark.parametrize("drop_last", [False, True])
def test_global_batches_are_split_between_ranks(drop_last: bool) -> None:
    one = list(samplers.EpochBatchSampler(11, 4, drop_last=drop_last, shuffle=True, seed=3))
    shards = [
        list(samplers.EpochBatchSampler(11, 2, drop_last, True, 3, num_replicas=2, rank=r))
        for r in (0, 1)
    ]
    # each global batch of 4 is the union of the ranks' 2 + 2 (the last one 2 + 1)
    for index, batch in enumerate(one):
        merged = [i for shard in shards for i in (shard[index] if index < len(shard) else [])]
        assert sorted(merged) == sorted(batch)
    assert len(samplers.EpochBatchSampler(11, 2, drop_last, num_replicas=2)) == len(one)


def test_training_pads_a_rank_left_without_samples() -> None:
    # 9 records, global batches of 4 (2 ranks x 2): the third global batch has 1 record
    rank1 = iter(samplers.EpochBatchSampler(9, 2, num_replicas=2, rank=1, repeat=True))
    batches = _take(rank1, 3)
    assert batches[2] and all(batch for batch in batches)
    rank1_val = list(samplers.EpochBatchSampler(9, 2, num_replicas=2, rank=1))
    assert len(rank1_val) == 2  # validation: no padding, this rank just has fewer batches


def test_upstream_building_blocks() -> None:
    batches = torch.utils.data.BatchSampler(range(10), 3, drop_last=False)
    assert list(samplers.DistributedBatchSampler(batches, 2, 1)) == [[3, 4, 5], [9]]
    assert list(samplers.SkipBatchSampler(batches, 3)) == [[9]]
    repeated = iter(samplers.RepeatBatchSampler(batches))
    assert len(_take(repeated, 9)) == 9
    assert list(samplers.DistributedSampler(range(5), 2, 0)) == [0, 2, 4]
    assert list(samplers.SkipSampler(range(5), 3)) == [3, 4]
    shuffled = list(samplers.ReproducibleShuffleSampler(range(6), seed=2))
    assert sorted(shuffled) == list(range(6))
    assert shuffled == list(samplers.ReproducibleShuffleSampler(range(6), seed=2))
    adapted = pytorch.adapt_batch_sampler(batches, repeat=True, skip=1, num_replicas=2, rank=0)
    assert _take(iter(adapted), 3) == [[6, 7, 8], [0, 1, 2], [6, 7, 8]]
    with pytest.raises(ValueError, match="rank"):
        samplers.DistributedSampler(range(5), 2, 2)


def test_dataloader_outside_det_is_one_epoch() -> None:
    data = torch.utils.data.TensorDataset(torch.arange(10.0))
    loader = pytorch.DataLoader(data, batch_size=4)
    assert len(loader) == 3
    assert [b[0].tolist() for b in loader] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    custom = pytorch.DataLoader(
        data, batch_sampler=torch.utils.data.BatchSampler(range(10), 5, drop_last=False)
    )
    assert [len(b[0]) for b in custom.get_data_loader(num_replicas=2, rank=1)] == [5]


def test_dataloader_shuffle_seed_comes_from_the_generator() -> None:
    data = torch.utils.data.TensorDataset(torch.arange(20.0))
    generator = torch.Generator().manual_seed(9)
    first = [b[0].tolist() for b in pytorch.DataLoader(data, 5, shuffle=True, generator=generator)]
    again = [
        b[0].tolist()
        for b in pytorch.DataLoader(
            data, 5, shuffle=True, generator=torch.Generator().manual_seed(9)
        )
    ]
    assert first == again and sorted(i for batch in first for i in batch) == list(range(20))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"batch_size": None}, "batch_size"),
        ({"batch_size": 0}, "batch_size"),
        ({"num_workers": -1}, "num_workers"),
        ({"sampler": [0, 1], "shuffle": True}, "sampler"),
        ({"batch_sampler": [[0]], "batch_size": 2}, "batch_sampler"),
        ({"persistent_workers": True}, "persistent_workers"),
        ({"prefetch_factor": 2}, "prefetch_factor"),
    ],
)
def test_dataloader_argument_errors(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        pytorch.DataLoader(torch.utils.data.TensorDataset(torch.zeros(4)), **kwargs)


def test_iterable_datasets_are_refused() -> None:
    class Stream(torch.utils.data.IterableDataset):  # type: ignore[type-arg]
        def __iter__(self) -> Any:
            return iter(range(3))

    with pytest.raises(ValueError, match="IterableDataset"):
        pytorch.DataLoader(Stream())


def test_to_device_and_data_length() -> None:
    warned: set[type] = set()
    batch = {"x": np.ones((2, 3), dtype=np.float32), "y": [torch.zeros(2)], "name": "a"}
    moved = pytorch.to_device(batch, torch.device("cpu"), warned)
    assert isinstance(moved["x"], torch.Tensor) and moved["name"] == "a" and warned == {str}
    assert pytorch.data_length(batch) == 2
    assert pytorch.data_length((torch.zeros(5), torch.zeros(5))) == 5
    with pytest.raises(TypeError, match="length"):
        pytorch.data_length(3)  # type: ignore[arg-type]
