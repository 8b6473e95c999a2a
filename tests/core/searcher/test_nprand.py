"""The searcher RNG reproduces numpy's legacy RandomState and persists as JSON."""

from __future__ import annotations

import json
import uuid

import numpy as np
import pytest

from determined.searcher import RandomState, new_create, new_request_id


@pytest.mark.parametrize("seed", [0, 1, 42, 1234567, 2**32 - 1])
def test_random_sample_and_randint_match_numpy(seed: int) -> None:
    ours, theirs = RandomState(seed), np.random.RandomState(seed)
    bounds = [1, 2, 3, 7, 10, 100, 1000, 2**31, 2**32, 2**33 + 5, 10**15]
    for i in range(3000):
        if i % 2:
            assert ours.random_sample() == theirs.random_sample()
        else:
            n = bounds[i % len(bounds)]
            assert ours.randint(0, n) == theirs.randint(0, n)
    assert ours.randint(-5, 17) == theirs.randint(-5, 17)
    assert ours.randint(9) == theirs.randint(9)


def test_uniform_and_intn_are_numpy_draws() -> None:
    ours, theirs = RandomState(7), np.random.RandomState(7)
    for _ in range(200):
        assert ours.uniform(-2.0, 3.5) == -2.0 + 5.5 * theirs.random_sample()
        assert ours.intn(13) == theirs.randint(0, 13)
        assert ours.int64n(2**31) == theirs.randint(0, 2**31)


def test_state_round_trips_through_json_and_continues_identically() -> None:
    rng = RandomState(99)
    for _ in range(700):  # cross a twist boundary
        rng.bits32()
    state = json.loads(json.dumps(rng.state_dict()))
    assert len(state["key"]) == 624 and state["pos"] == 700 - 624
    restored = RandomState(0)
    restored.load_state_dict(state)
    assert [restored.bits32() for _ in range(1000)] == [rng.bits32() for _ in range(1000)]


def test_bad_state_is_refused_with_the_field_name() -> None:
    with pytest.raises(ValueError, match=r"rand\.key"):
        RandomState().load_state_dict({"key": [1, 2], "pos": 0})
    with pytest.raises(ValueError, match=r"rand\.pos"):
        RandomState().load_state_dict({"key": [0] * 624, "pos": 1000})


def test_bounds_are_checked() -> None:
    rng = RandomState(1)
    with pytest.raises(ValueError, match="n: must be positive"):
        rng.intn(0)
    with pytest.raises(ValueError, match="high"):
        rng.uniform(1.0, 1.0)
    with pytest.raises(ValueError, match="high"):
        rng.randint(3, 3)


def test_request_id_is_uuid4_from_four_draws_then_seed() -> None:
    rng, mirror = RandomState(5), RandomState(5)
    request_id = new_request_id(rng)
    parsed = uuid.UUID(request_id)
    assert parsed.version == 4 and parsed.variant == uuid.RFC_4122
    raw = b"".join(mirror.bits32().to_bytes(4, "little") for _ in range(4))
    expected = bytearray(raw)
    expected[6] = (expected[6] & 0x0F) | 0x40
    expected[8] = (expected[8] & 0x3F) | 0x80
    assert parsed.bytes == bytes(expected)
    assert rng.state_dict() == mirror.state_dict()  # exactly four draws consumed

    create = new_create(RandomState(5), {"x": 1})
    assert create.request_id == request_id
    assert 0 <= create.trial_seed < 2**31
    assert create.trial_seed == mirror.int64n(2**31)
