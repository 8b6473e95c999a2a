"""The optuna searcher passes det's search-method conformance suite, with each sampler and pruner."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from determined.master.testing.searcher_suite import MakeMethod, SearchMethodSuite
from determined.optuna import OptunaSearch


class OptunaSuite(SearchMethodSuite):
    expected_trials = 12
    searcher_fields: dict[str, Any] = {}

    @pytest.fixture
    def make_method(self) -> MakeMethod:
        return OptunaSearch

    @pytest.fixture
    def config(self, optuna_config_factory: Callable[..., dict]) -> dict[str, Any]:
        return optuna_config_factory(**self.searcher_fields)


class TestTPEUnderASHA(OptunaSuite):
    searcher_fields = {"sampler": "tpe", "pruner": {"type": "asha", "divisor": 3}}


class TestRandomUnderAdaptiveASHA(OptunaSuite):
    searcher_fields = {"sampler": "random", "pruner": {"type": "adaptive_asha", "divisor": 2}}


class TestCmaEsUnderHyperband(OptunaSuite):
    searcher_fields = {"sampler": "cmaes", "pruner": {"type": "hyperband", "min_resource": 10}}


class TestQMCUnderMedian(OptunaSuite):
    searcher_fields = {"sampler": "qmc", "pruner": {"type": "median", "n_startup_trials": 2}}


class TestGPWithoutPruning(OptunaSuite):
    expected_trials = 6
    searcher_fields = {"sampler": "gp", "pruner": "none", "max_trials": 6, "n_startup_trials": 3}
