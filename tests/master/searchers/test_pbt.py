"""The ``pbt`` searcher: conformance, round arithmetic, exploration bounds and config errors."""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Callable
from typing import Any

import pytest

from determined.master.searchers import (
    PBTConfig,
    PBTSearch,
    Searcher,
    build_search_method,
    explore,
    preview,
)
from determined.master.testing.searcher_suite import (
    FakeTrialRunner,
    MakeMethod,
    SearchMethodSuite,
)
from determined.searcher import Create, ExitedReason, RandomState, SearchMethod, Shutdown, Stop

HPARAMS = {
    "lr": {"type": "log", "minval": -4, "maxval": -1, "base": 10},
    "layers": {"type": "int", "minval": 1, "maxval": 8},
    "dropout": {"type": "double", "minval": 0.0, "maxval": 0.5},
    "act": {"type": "categorical", "vals": ["relu", "tanh", "gelu"]},
    "opt": {"momentum": {"type": "double", "minval": 0.5, "maxval": 0.99}, "name": "sgd"},
    "bs": 32,
}


def pbt_config(
    seed: int = 7,
    population_size: int = 8,
    num_rounds: int = 4,
    truncate_fraction: float = 0.25,
    resample_probability: float = 0.2,
    perturb_factor: float = 0.2,
    **extra: Any,
) -> dict[str, Any]:
    return {
        "searcher": {
            "name": "pbt",
            "metric": "val_loss",
            "smaller_is_better": True,
            "population_size": population_size,
            "num_rounds": num_rounds,
            "length_per_round": {"batches": 10},
            "replace_function": {"truncate_fraction": truncate_fraction},
            "explore_function": {
                "resample_probability": resample_probability,
                "perturb_factor": perturb_factor,
            },
            **extra,
        },
        "hyperparameters": copy.deepcopy(HPARAMS),
        "reproducibility": {"experiment_seed": seed},
    }


def _method(config: dict[str, Any]) -> SearchMethod:
    method = build_search_method(config)
    assert isinstance(method, PBTSearch)
    return method


class TestPBTConformance(SearchMethodSuite):
    # 8 first, then 2 copies after each of the first 3 rounds
    expected_trials = 8 + 2 * 3

    @pytest.fixture
    def config(self) -> dict[str, Any]:
        return pbt_config()

    @pytest.fixture
    def make_method(self) -> MakeMethod:
        return _method


def _lr_metric(create: Create, length: int) -> float:
    """Smaller lr is better; a warm-started copy keeps improving with length."""
    return math.log10(create.hparams["lr"]) + 10.0 / (length + 1)


def _run(config: dict[str, Any], **kwargs: Any) -> FakeTrialRunner:
    searcher = Searcher(config, method=_method(config))
    return FakeTrialRunner(searcher, 40, metric=kwargs.pop("metric", _lr_metric), **kwargs)


def test_each_round_replaces_the_worst_by_copies_of_the_best() -> None:
    config = pbt_config(population_size=8, num_rounds=4, truncate_fraction=0.25)
    runner = _run(config).start()
    method = runner.searcher.method
    assert isinstance(method, PBTSearch)
    first = [a.request_id for a in runner.log if isinstance(a, Create)]
    assert len(first) == 8
    # every member reports round 0 (the runner also lets them run on into later rounds)
    while method.round == 0:
        runner.step()
    ranked = sorted(first, key=lambda rid: runner.creates[rid].hparams["lr"])
    stops = [a.request_id for a in runner.log if isinstance(a, Stop)]
    assert set(stops) == set(ranked[-2:])
    copies = [a for a in runner.log if isinstance(a, Create) and a.parent_request_id]
    assert [c.parent_request_id for c in copies] == ranked[:2]
    assert set(method.members) == set(ranked[:6]) | {c.request_id for c in copies}
    # the copies start their own count at 0 and play the remaining 3 rounds
    assert runner.searcher.rung_lengths(copies[0].request_id) == [10, 20, 30]
    runner.run()
    creates = [a for a in runner.log if isinstance(a, Create)]
    assert len(creates) == 8 + 2 * 3
    assert runner.shutdown == Shutdown()
    assert runner.searcher.progress() == pytest.approx(1.0)
    # a trial's lengths never go past its last round
    for create in creates:
        start = method.start_round[create.request_id]
        assert runner.reported[create.request_id] <= 10 * (4 - start)


def test_no_truncation_runs_one_population_through_every_round() -> None:
    runner = _run(pbt_config(population_size=5, num_rounds=3, truncate_fraction=0.1)).start()
    runner.run()
    creates = [a for a in runner.log if isinstance(a, Create)]
    assert len(creates) == 5  # int(0.1 * 5) == 0
    assert all(runner.reported[c.request_id] == 30 for c in creates)


def test_larger_is_better_flips_the_ranking() -> None:
    config = pbt_config(population_size=4, num_rounds=2, truncate_fraction=0.5)
    config["searcher"]["smaller_is_better"] = False
    runner = _run(config).start()
    runner.run()
    first = [a.request_id for a in runner.log if isinstance(a, Create)][:4]
    ranked = sorted(first, key=lambda rid: -runner.creates[rid].hparams["lr"])
    copies = [a for a in runner.log if isinstance(a, Create) and a.parent_request_id]
    assert [c.parent_request_id for c in copies] == ranked[:2]


def test_an_early_exit_ranks_last_and_is_replaced() -> None:
    config = pbt_config(population_size=4, num_rounds=3, truncate_fraction=0.25)
    failing: list[str] = []

    def fail(create: Create) -> ExitedReason | None:
        if not failing and create.parent_request_id is None:
            failing.append(create.request_id)  # the first trial to run, at its first turn
            return ExitedReason.ERRORED
        return None

    runner = _run(config, fail=fail).start().run()
    copies = [a for a in runner.log if isinstance(a, Create) and a.parent_request_id]
    assert len(copies) == 2
    assert failing[0] not in {c.parent_request_id for c in copies}
    # the failed trial was not stopped (it had exited) but is no longer in the population
    assert Stop(failing[0]) not in runner.log
    assert runner.shutdown == Shutdown()


def test_reports_of_a_later_round_wait_for_the_current_one() -> None:
    config = pbt_config(population_size=2, num_rounds=3, truncate_fraction=0.5)
    searcher = Searcher(config, method=_method(config))
    a, b = (c.request_id for c in searcher.initial_trials())
    for rid in (a, b):
        searcher.trial_created(rid)
    # a races ahead through two rounds; nothing is decided until b reports round 0
    assert searcher.validation_completed(a, {"val_loss": 1.0, "batches": 10}) == []
    assert searcher.validation_completed(a, {"val_loss": 0.5, "batches": 20}) == []
    actions = searcher.validation_completed(b, {"val_loss": 2.0, "batches": 10})
    assert actions[0] == Stop(b)
    child = actions[1]
    assert isinstance(child, Create) and child.parent_request_id == a
    assert child.parent_steps == 10  # a's state at the end of round 0, not at 20
    assert len(actions) == 2  # round 1 waits for the copy of a
    searcher.trial_created(child.request_id)
    actions = searcher.validation_completed(child.request_id, {"val_loss": 0.1, "batches": 10})
    assert actions[0] == Stop(a)  # a's round-1 report (0.5) was kept; the copy's 0.1 beats it
    assert isinstance(actions[1], Create) and actions[1].parent_request_id == child.request_id
    assert actions[1].parent_steps == 10  # the copy counts its own batches from 0


def _within_bounds(hparams: dict[str, Any]) -> None:
    assert 1e-4 <= hparams["lr"] <= 1e-1
    assert 1 <= hparams["layers"] <= 8 and isinstance(hparams["layers"], int)
    assert 0.0 <= hparams["dropout"] <= 0.5
    assert hparams["act"] in ("relu", "tanh", "gelu")
    assert 0.5 <= hparams["opt"]["momentum"] <= 0.99
    assert hparams["opt"]["name"] == "sgd" and hparams["bs"] == 32


def test_explore_perturbs_by_the_factor_up_or_down_and_clips_to_bounds() -> None:
    rng = RandomState(3)
    old = {
        "lr": 0.01,
        "layers": 5,
        "dropout": 0.45,
        "act": "tanh",
        "opt": {"momentum": 0.98, "name": "sgd"},
        "bs": 32,
    }
    seen: dict[str, set[Any]] = {"lr": set(), "layers": set(), "dropout": set(), "act": set()}
    for _ in range(200):
        new = explore(HPARAMS, old, rng, resample_probability=0.0, perturb_factor=0.2)
        _within_bounds(new)
        for name in seen:
            seen[name].add(new[name])
        assert new["opt"]["momentum"] in (pytest.approx(0.98 * 0.8), 0.99)
    assert sorted(round(v, 9) for v in seen["lr"]) == [0.008, 0.012]
    assert seen["layers"] == {4, 6}  # floor(5 * 0.8), ceil(5 * 1.2)
    assert sorted(round(v, 9) for v in seen["dropout"]) == [0.36, 0.5]  # 0.54 clipped
    assert seen["act"] == {"tanh"}  # categorical only changes when resampled
    # at the bounds: a log value clips to base**minval / base**maxval, an int to minval/maxval
    low = explore(HPARAMS, {**old, "lr": 1e-4, "layers": 1}, RandomState(1), 0.0, 0.9)
    _within_bounds(low)


def test_explore_resamples_with_the_probability() -> None:
    rng = RandomState(11)
    old = {"act": "tanh"}
    spec = {"act": HPARAMS["act"]}
    values = [explore(spec, old, rng, 1.0, 0.2)["act"] for _ in range(60)]
    assert set(values) == {"relu", "tanh", "gelu"}
    assert [explore(spec, old, rng, 0.0, 0.2)["act"] for _ in range(20)] == ["tanh"] * 20


def test_every_copy_stays_within_the_bounds() -> None:
    runner = _run(pbt_config(population_size=6, num_rounds=6, resample_probability=0.5)).start()
    runner.run()
    creates = [a for a in runner.log if isinstance(a, Create)]
    assert len(creates) == 6 + 1 * 5
    for create in creates:
        _within_bounds(create.hparams)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda s: s.pop("population_size"), "searcher.population_size"),
        (lambda s: s.update(num_rounds=0), "searcher.num_rounds"),
        (lambda s: s.update(length_per_round={"steps": 3}), "searcher.length_per_round"),
        (lambda s: s.update(length_per_round={"batches": 0}), "searcher.length_per_round"),
        (lambda s: s.pop("replace_function"), "searcher.replace_function"),
        (
            lambda s: s.update(replace_function={"truncate_fraction": 0.6}),
            "searcher.replace_function.truncate_fraction",
        ),
        (
            lambda s: s.update(explore_function={"perturb_factor": 0.1}),
            "searcher.explore_function.resample_probability",
        ),
        (
            lambda s: s["explore_function"].update(perturb_factor=-1),
            "searcher.explore_function.perturb_factor",
        ),
        (lambda s: s.update(metric=""), "searcher.metric"),
        (lambda s: s.update(smaller_is_better="yes"), "searcher.smaller_is_better"),
    ],
)
def test_bad_config_names_the_field(change: Callable[[dict], Any], field: str) -> None:
    config = pbt_config()
    change(config["searcher"])
    with pytest.raises(ValueError, match=f"^{field.replace('.', '[.]')}:"):
        build_search_method(config)


def test_config_reads_a_bare_round_length_in_the_time_metric() -> None:
    section = pbt_config(length_per_round=None)["searcher"]
    section.update(length_per_round=4, time_metric="epochs")
    cfg = PBTConfig.from_section(section)
    assert (cfg.time_metric, cfg.length_per_round, cfg.num_truncate) == ("epochs", 4, 2)


def test_preview_lists_the_trials_of_each_length() -> None:
    summary = preview(pbt_config(population_size=8, num_rounds=4, truncate_fraction=0.25))
    trials = summary["summary"]["trials"]
    # 2 stopped after round 1 of their own, ..., the survivors run all 4 rounds
    by_length = {t["unit"]["value"]: t["count"] for t in trials}
    assert sum(by_length.values()) == 14
    assert all(t["unit"]["name"] == "batches" for t in trials)
    assert max(by_length) == 40


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda s: s.pop("num_rounds"), "searcher.num_rounds: required for the pbt searcher"),
        (
            lambda s: s.update(replace_function={"truncate_fraction": 0.7}),
            "searcher.replace_function.truncate_fraction: must be a number between 0 and 0.5",
        ),
        (
            lambda s: s["explore_function"].pop("perturb_factor"),
            "searcher.explore_function.perturb_factor: required",
        ),
        (lambda s: s.update(max_trials=3), "searcher.max_trials: unknown field for the pbt"),
    ],
)
def test_experiment_config_validation_names_the_field(
    change: Callable[[dict], Any], message: str
) -> None:
    from determined.config import InvalidConfigError, validate_experiment_config

    config = pbt_config()
    config.update(entrypoint="python3 train.py", checkpoint_storage={"type": "shared_fs"})
    config["checkpoint_storage"]["host_path"] = "/tmp"
    validate_experiment_config(copy.deepcopy(config))
    change(config["searcher"])
    with pytest.raises(InvalidConfigError, match=re.escape(message)):
        validate_experiment_config(config)


def test_training_length_of_a_pbt_search_is_every_round() -> None:
    from determined.core.plugins import parse_max_length

    section = pbt_config(num_rounds=4)["searcher"]
    length, unit = parse_max_length(section)
    assert length == 40 and unit is not None and unit.name == "BATCHES"
