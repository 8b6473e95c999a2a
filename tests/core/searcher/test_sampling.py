"""Hyperparameter sampling and grids follow upstream's arithmetic and draw order."""

from __future__ import annotations

import math

import numpy as np
import pytest

from determined.searcher import (
    Create,
    RandomState,
    SearchContext,
    Shutdown,
    Stop,
    action_from_dict,
    grid_axis,
    hparam_grid,
    round_half_away,
    sample_hparams,
)

HPARAMS = {
    "lr": {"type": "log", "minval": -4, "maxval": -1, "base": 10},
    "layers": {"type": "int", "minval": 1, "maxval": 4},
    "opt": {"name": "sgd", "momentum": {"type": "double", "minval": 0.0, "maxval": 0.9}},
    "act": {"type": "categorical", "vals": ["relu", "tanh", "gelu"]},
    "bs": 32,
    "fixed": {"type": "const", "val": [1, 2]},
}


def test_sample_matches_numpy_draws_in_sorted_name_order() -> None:
    ours = sample_hparams(HPARAMS, RandomState(42))
    ref = np.random.RandomState(42)
    # sorted names: act, bs, fixed, layers, lr, opt(momentum, name)
    expected = {
        "act": ["relu", "tanh", "gelu"][ref.randint(0, 3)],
        "bs": 32,
        "fixed": [1, 2],
        "layers": 1 + ref.randint(0, 4),
        "lr": 10.0 ** (-4.0 + 3.0 * ref.random_sample()),
        "opt": {"momentum": 0.0 + 0.9 * ref.random_sample(), "name": "sgd"},
    }
    assert ours == expected
    assert list(ours) == sorted(ours)


def test_same_seed_same_samples_and_consts_are_copies() -> None:
    first = [sample_hparams(HPARAMS, rng) for rng in [RandomState(3)] for _ in range(5)]
    rng = RandomState(3)
    second = [sample_hparams(HPARAMS, rng) for _ in range(5)]
    assert first == second
    first[0]["fixed"].append(3)
    assert HPARAMS["fixed"]["val"] == [1, 2]


def test_context_create_draws_hparams_then_request_id_then_seed() -> None:
    create = SearchContext(RandomState(11), HPARAMS).create()
    rng = RandomState(11)
    hparams = sample_hparams(HPARAMS, rng)
    from determined.searcher import new_create

    assert create == new_create(rng, hparams)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"type": "int", "minval": 3, "maxval": 3}, r"hyperparameters\.x\.maxval"),
        ({"type": "double", "minval": 0.0}, r"hyperparameters\.x\.maxval: required"),
        ({"type": "categorical", "vals": []}, r"hyperparameters\.x\.vals"),
        ({"type": "gauss"}, r"hyperparameters\.x\.type"),
    ],
)
def test_bad_hyperparameters_name_the_field(spec: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        sample_hparams({"x": spec}, RandomState(0))


def test_round_half_away_from_zero() -> None:
    assert [round_half_away(x) for x in (0.5, 1.5, 2.5, -0.5, -2.5, 2.49, 0.49999999999999994)] == [
        1,
        2,
        3,
        -1,
        -3,
        2,
        0,
    ]


def test_grid_axes_worked_examples() -> None:
    assert grid_axis({"type": "int", "minval": 1, "maxval": 10, "count": 4}) == [1, 4, 7, 10]
    assert grid_axis({"type": "int", "minval": 1, "maxval": 10, "count": 1}) == [6]
    assert grid_axis({"type": "int", "minval": 1, "maxval": 3, "count": 10}) == [1, 2, 3]
    assert grid_axis({"type": "double", "minval": 0, "maxval": 1, "count": 3}) == [0.0, 0.5, 1.0]
    assert grid_axis({"type": "double", "minval": 0, "maxval": 1, "count": 1}) == [0.5]
    logs = grid_axis({"type": "log", "minval": -4, "maxval": -1, "base": 10, "count": 4})
    assert [math.log10(v) for v in logs] == pytest.approx([-4, -3, -2, -1])
    assert grid_axis({"type": "log", "minval": -4, "maxval": -2, "base": 10, "count": 1}) == [
        10.0**-3
    ]
    assert grid_axis({"type": "categorical", "vals": ["a", "b"]}) == ["a", "b"]
    assert grid_axis({"type": "const", "val": 5}) == [5]
    assert grid_axis("literal") == ["literal"]


def test_grid_is_cartesian_product_first_axis_slowest_with_nested_axes() -> None:
    grid = hparam_grid(
        {
            "b": {"type": "categorical", "vals": ["x", "y"]},
            "a": {"type": "int", "minval": 0, "maxval": 1, "count": 2},
            "n": {"z": {"type": "const", "val": 1}, "m": {"type": "categorical", "vals": [7, 8]}},
            "e": {},
        }
    )
    assert len(grid) == 8
    assert grid[0] == {"a": 0, "b": "x", "e": {}, "n": {"m": 7, "z": 1}}
    assert grid[1] == {"a": 0, "b": "x", "e": {}, "n": {"m": 8, "z": 1}}
    assert grid[-1] == {"a": 1, "b": "y", "e": {}, "n": {"m": 8, "z": 1}}
    grid[0]["e"]["mutated"] = True
    assert grid[1]["e"] == {}


def test_grid_needs_counts() -> None:
    with pytest.raises(ValueError, match=r"hyperparameters\.opt\.lr\.count"):
        hparam_grid({"opt": {"lr": {"type": "double", "minval": 0, "maxval": 1}}})


def test_actions_round_trip_through_dicts() -> None:
    for action in (Create("id", 3, {"a": 1}), Stop("id"), Shutdown(cancel=True)):
        assert action_from_dict(action.to_dict()) == action
    with pytest.raises(ValueError, match=r"action\.type"):
        action_from_dict({"type": "train"})
