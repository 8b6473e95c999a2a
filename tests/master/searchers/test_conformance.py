"""Every built-in search method passes the search-method conformance suite."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from determined.master.searchers import build_search_method
from determined.master.testing.searcher_suite import MakeMethod, SearchMethodSuite
from determined.searcher import SearchMethod

GRID_HPARAMS = {
    "a": {"type": "int", "minval": 0, "maxval": 9, "count": 5},
    "b": {"type": "categorical", "vals": [1, 2]},
    "c": [1, 2],  # a list is one constant value
}


def _builtin(config: dict[str, Any]) -> SearchMethod:
    method = build_search_method(config)
    assert method is not None
    return method


class BuiltinSuite(SearchMethodSuite):
    @pytest.fixture
    def make_method(self) -> MakeMethod:
        return _builtin


class TestSingle(BuiltinSuite):
    expected_trials = 1

    @pytest.fixture
    def config(self, config_factory: Callable[..., dict]) -> dict[str, Any]:
        return config_factory(name="single", max_length={"batches": 100})


class TestRandom(BuiltinSuite):
    expected_trials = 9

    @pytest.fixture
    def config(self, config_factory: Callable[..., dict]) -> dict[str, Any]:
        return config_factory(name="random", max_trials=9, max_concurrent_trials=3)


class TestGrid(BuiltinSuite):
    expected_trials = 10

    @pytest.fixture
    def config(self, config_factory: Callable[..., dict]) -> dict[str, Any]:
        return config_factory(name="grid", max_concurrent_trials=2, hyperparameters=GRID_HPARAMS)


class TestAsyncHalving(BuiltinSuite):
    expected_trials = 20

    @pytest.fixture
    def config(self, config_factory: Callable[..., dict]) -> dict[str, Any]:
        return config_factory(
            name="async_halving",
            max_trials=20,
            num_rungs=3,
            divisor=2,
            max_concurrent_trials=4,
            time_metric="batches",
            max_time=100,
        )


class TestAdaptiveAsha(BuiltinSuite):
    expected_trials = 40

    @pytest.fixture
    def config(self, asha_config_factory: Callable[..., dict]) -> dict[str, Any]:
        return asha_config_factory(max_trials=40, mode="conservative", divisor=3)
