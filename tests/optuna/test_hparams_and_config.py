"""Every sampler proposes valid det hyperparameters of every type; bad fields are named."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest

from determined.master.searchers import Searcher
from determined.master.testing.searcher_suite import FakeTrialRunner
from determined.optuna import SAMPLERS, OptunaSearch, build_search_method


def _check(hparams: dict[str, Any]) -> None:
    assert set(hparams) == {"lr", "wd", "layers", "dropout", "act", "opt", "bs"}
    assert 1e-4 <= hparams["lr"] <= 1e-1 and isinstance(hparams["lr"], float)
    assert 2.0**-10 <= hparams["wd"] <= 2.0**-2
    assert hparams["layers"] in (1, 2, 3, 4) and type(hparams["layers"]) is int
    assert 0.0 <= hparams["dropout"] <= 0.5
    assert hparams["act"] in ("relu", "gelu", [1, 2], {"k": True})
    assert hparams["bs"] == 32
    opt = hparams["opt"]
    assert set(opt) == {"name", "momentum", "nesterov", "decay"}
    assert opt["name"] == "sgd" and opt["decay"] == 0.5
    assert 0.0 <= opt["momentum"] <= 0.9
    assert opt["nesterov"] in (True, False) and type(opt["nesterov"]) is bool


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_every_sampler_proposes_valid_hparams_of_every_type(
    sampler: str, optuna_config_factory: Callable[..., dict], build_searcher: Callable
) -> None:
    # Three startup trials, then the sampler's own model proposes the other nine.
    config = optuna_config_factory(sampler=sampler, max_trials=12, max_concurrent_trials=2)
    runner = FakeTrialRunner(
        build_searcher(config),
        metric=lambda create, length: create.hparams["lr"] * 10 + create.hparams["dropout"],
    )
    runner.start().run()
    assert len(runner.creates) == 12
    for create in runner.creates.values():
        _check(create.hparams)
    # the study holds the same points, flattened, one Optuna trial per det trial
    method = runner.searcher.method
    assert isinstance(method, OptunaSearch)
    trials = method.study.study.trials
    assert len(trials) == 12
    for request_id, create in runner.creates.items():
        params = trials[method.study.numbers[request_id]].params
        assert math.isclose(params["opt.momentum"], create.hparams["opt"]["momentum"])
    values = {round(create.hparams["lr"], 12) for create in runner.creates.values()}
    assert len(values) > 6, "the sampler proposed the same point over and over"


def test_a_space_of_constants_only_still_creates_trials(
    optuna_config_factory: Callable[..., dict], build_searcher: Callable
) -> None:
    config = optuna_config_factory(
        hyperparameters={"a": 1, "b": {"c": {"type": "const", "val": 2}}}
    )
    runner = FakeTrialRunner(build_searcher(config)).start().run()
    assert [c.hparams for c in runner.creates.values()] == [{"a": 1, "b": {"c": 2}}] * 12


def test_only_the_optuna_name_is_answered(optuna_config_factory: Callable[..., dict]) -> None:
    config = optuna_config_factory()
    assert isinstance(build_search_method(config), OptunaSearch)
    config["searcher"]["name"] = "random"
    assert build_search_method(config) is None


def test_the_master_finds_the_searcher_through_the_entry_point(
    optuna_config_factory: Callable[..., dict],
) -> None:
    # No explicit method: the Searcher asks the plugin manager, which loaded the entry point.
    from importlib.metadata import entry_points

    (ep,) = [ep for ep in entry_points(group="determined") if ep.name == "optuna"]
    assert ep.value == "determined.optuna._plugin" and ep.dist is not None
    assert ep.dist.name == "det-plugin-optuna"
    assert isinstance(Searcher(optuna_config_factory()).method, OptunaSearch)


BAD_FIELDS = [
    ({"sampler": "tpf"}, "searcher.sampler: expected one of tpe, cmaes, gp, random, qmc"),
    ({"metric": ""}, "searcher.metric"),
    ({"max_trials": 0}, "searcher.max_trials: expected an integer >= 1"),
    ({"max_trials": None}, "searcher.max_trials: required"),
    ({"max_concurrent_trials": -1}, "searcher.max_concurrent_trials"),
    ({"seed": -3}, "searcher.seed"),
    ({"smaller_is_better": "yes"}, "searcher.smaller_is_better"),
    ({"samplr": "tpe"}, "searcher.samplr: unknown field for the optuna searcher"),
    ({"pruner": {"type": "sha"}}, "searcher.pruner.type: expected one of asha, adaptive_asha"),
    ({"pruner": {"type": "asha", "divisor": 1}}, "searcher.pruner.divisor: expected a number > 1"),
    ({"pruner": {"type": "asha", "mode": "x"}}, "searcher.pruner.mode: unknown field for the asha"),
    ({"pruner": {"type": "adaptive_asha", "mode": "x"}}, "searcher.pruner.mode: expected one of"),
    (
        {"pruner": {"type": "hyperband", "reduction_factor": 2.5}},
        "searcher.pruner.reduction_factor",
    ),
    ({"pruner": {"type": "median", "num_checks": 0}}, "searcher.pruner.num_checks"),
    ({"pruner": 3}, "searcher.pruner: expected a mapping"),
    ({"max_time": None, "time_metric": None, "pruner": "asha"}, "searcher.pruner.type: the asha"),
    ({"max_time": None}, "searcher.max_time: required with searcher.time_metric"),
    ({"max_time": 0}, "searcher.max_time: expected an integer >= 1"),
    ({"time_metric": None}, "searcher.time_metric: required with max_time"),
    ({"max_time": None, "max_length": {"batches": 5, "epochs": 1}}, "searcher.max_length"),
]


@pytest.mark.parametrize(("fields", "message"), BAD_FIELDS)
def test_bad_searcher_fields_are_named(
    fields: dict[str, Any], message: str, optuna_config_factory: Callable[..., dict]
) -> None:
    with pytest.raises(ValueError) as info:
        OptunaSearch(optuna_config_factory(**fields))
    assert str(info.value).startswith(message), str(info.value)


BAD_HPARAMS = [
    ({"x": {"type": "int", "minval": 3, "maxval": 3}}, "hyperparameters.x.maxval"),
    ({"x": {"type": "int", "minval": 0.5, "maxval": 3}}, "hyperparameters.x.minval"),
    ({"n": {"x": {"type": "double", "maxval": 1}}}, "hyperparameters.n.x.minval: required"),
    ({"x": {"type": "log", "minval": 0, "maxval": 1, "base": 1}}, "hyperparameters.x.base"),
    ({"x": {"type": "categorical", "vals": []}}, "hyperparameters.x.vals"),
    ({"x": {"type": "uniform"}}, "hyperparameters.x.type: expected one of"),
    ({"x": {"type": "const"}}, "hyperparameters.x.val: required"),
]


@pytest.mark.parametrize(("hparams", "message"), BAD_HPARAMS)
def test_bad_hyperparameters_are_named(
    hparams: dict[str, Any], message: str, optuna_config_factory: Callable[..., dict]
) -> None:
    with pytest.raises(ValueError) as info:
        OptunaSearch(optuna_config_factory(hyperparameters=hparams))
    assert str(info.value).startswith(message), str(info.value)


def test_legacy_max_length_and_maximizing(optuna_config_factory: Callable[..., dict]) -> None:
    config = optuna_config_factory(
        time_metric=None, max_time=None, max_length={"epochs": 9}, smaller_is_better=False
    )
    method = OptunaSearch(config)
    assert (method.settings.time_metric, method.settings.max_time) == ("epochs", 9)
    assert method.study.study.direction.name == "MAXIMIZE"
    assert method.settings.pruner == {"type": "asha", "divisor": 4, "max_rungs": 5}


def test_plugin_discovery_does_not_import_optuna() -> None:
    # Every trial process builds the plugin manager: the entry point must stay light.
    import os
    import subprocess
    import sys

    code = (
        "import sys\nfrom determined.core import plugins\nplugins.get_plugin_manager()\n"
        "assert plugins.get_plugin_manager().get_plugin('optuna') is not None\n"
        "print('optuna' in sys.modules)"
    )
    env = {k: v for k, v in os.environ.items() if k != "DET_DISABLE_PLUGIN_AUTOLOAD"}
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
        env=env,
    )
    assert out.stdout.strip() == "False"
