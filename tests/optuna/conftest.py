"""Configs of the ``optuna`` searcher and a Searcher over it (built the way det-master builds it)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from determined.master.searchers import Searcher
from determined.optuna import OptunaSearch

HPARAMS: dict[str, Any] = {
    "lr": {"type": "log", "minval": -4, "maxval": -1, "base": 10},
    "wd": {"type": "log", "minval": -10, "maxval": -2, "base": 2},
    "layers": {"type": "int", "minval": 1, "maxval": 4},
    "dropout": {"type": "double", "minval": 0.0, "maxval": 0.5},
    "act": {"type": "categorical", "vals": ["relu", "gelu", [1, 2], {"k": True}]},
    "opt": {
        "name": "sgd",
        "momentum": {"type": "double", "minval": 0.0, "maxval": 0.9},
        "nesterov": {"type": "categorical", "vals": [True, False]},
        "decay": {"type": "const", "val": 0.5},
    },
    "bs": 32,
}


def optuna_config(
    experiment_seed: int = 7, hyperparameters: dict | None = None, **searcher: Any
) -> dict:
    """An experiment config for the optuna searcher; keyword args override searcher fields."""
    section: dict[str, Any] = {
        "name": "optuna",
        "sampler": "tpe",
        "metric": "val_loss",
        "smaller_is_better": True,
        "time_metric": "batches",
        "max_time": 100,
        "max_trials": 12,
        "max_concurrent_trials": 4,
        "n_startup_trials": 3,
    }
    section.update(searcher)
    return {
        "searcher": section,
        "hyperparameters": copy.deepcopy(HPARAMS if hyperparameters is None else hyperparameters),
        "reproducibility": {"experiment_seed": experiment_seed},
    }


def searcher_for(config: dict) -> Searcher:
    return Searcher(config, method=OptunaSearch(config))


@pytest.fixture
def optuna_config_factory() -> Callable[..., dict]:
    """``optuna_config(experiment_seed=7, hyperparameters=None, **searcher_fields)``."""
    return optuna_config


@pytest.fixture
def build_searcher() -> Callable[[dict], Searcher]:
    return searcher_for
