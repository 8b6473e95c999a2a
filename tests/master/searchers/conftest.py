"""Config builders and the simulated trials (the conformance suite's) that drive a Searcher."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from determined.master.searchers import Searcher, build_search_method
from determined.master.testing.searcher_suite import FakeTrialRunner

HPARAMS = {
    "lr": {"type": "log", "minval": -4, "maxval": -1, "base": 10},
    "layers": {"type": "int", "minval": 1, "maxval": 4},
    "opt": {"name": "sgd", "momentum": {"type": "double", "minval": 0.0, "maxval": 0.9}},
    "bs": 32,
}


def make_config(seed: int = 42, hyperparameters: dict | None = None, **searcher: Any) -> dict:
    """A fully defaulted experiment config, built by hand."""
    return {
        "searcher": {
            "metric": "val_loss",
            "smaller_is_better": True,
            "max_concurrent_trials": 16,
            "source_trial_id": None,
            "source_checkpoint_uuid": None,
            **searcher,
        },
        "hyperparameters": copy.deepcopy(HPARAMS if hyperparameters is None else hyperparameters),
        "reproducibility": {"experiment_seed": seed},
    }


def asha_config(**overrides: Any) -> dict:
    searcher = {
        "name": "adaptive_asha",
        "max_trials": 16,
        "mode": "standard",
        "divisor": 4,
        "max_rungs": 5,
        "bracket_rungs": [],
        "time_metric": "batches",
        "max_time": 100,
        "max_length": None,
    }
    searcher.update(overrides)
    return make_config(**searcher)


def searcher_for(config: dict) -> Searcher:
    """A Searcher on the built-in method (no plugin manager needed)."""
    method = build_search_method(config)
    assert method is not None
    return Searcher(config, method=method)


@pytest.fixture
def runner_factory() -> type[FakeTrialRunner]:
    return FakeTrialRunner


@pytest.fixture
def config_factory() -> Callable[..., dict]:
    return make_config


@pytest.fixture
def asha_config_factory() -> Callable[..., dict]:
    return asha_config


@pytest.fixture
def build_searcher() -> Callable[[dict], Searcher]:
    return searcher_for
