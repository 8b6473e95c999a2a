"""preview(config): upstream's PreviewHPSearchResponse shape and the §2.7 totals."""

from __future__ import annotations

import pytest

from determined.master.searchers import preview


def _units(result: dict) -> list[tuple[int, int]]:
    return [(t["count"], t["unit"]["value"]) for t in result["summary"]["trials"]]


def test_worked_example_totals(asha_config_factory) -> None:
    config = asha_config_factory(max_trials=100, max_time=1000)
    result = preview(config)
    assert _units(result) == [(53, 15), (30, 62), (13, 250), (4, 1000)]
    assert sum(n for n, _ in _units(result)) == 100
    assert result["summary"]["config"] == config["searcher"]
    assert result["summary"]["trials"][0]["unit"] == {
        "name": "batches",
        "value": 15,
        "maxLength": False,
    }


def test_smaller_example_and_async_halving(asha_config_factory) -> None:
    # brackets [3 rungs: 12 trials, 2 rungs: 4]: 12 -> 9@6, 2@25, 1@100; 4 -> 3@25, 1@100
    assert _units(preview(asha_config_factory())) == [(9, 6), (5, 25), (2, 100)]
    config = asha_config_factory(name="async_halving", num_rungs=2, max_trials=8, max_time=16)
    assert _units(preview(config)) == [(6, 4), (2, 16)]


def test_full_length_searchers(config_factory) -> None:
    assert preview(config_factory(name="single"))["summary"]["trials"] == [
        {"count": 1, "unit": {"maxLength": True}}
    ]
    assert (
        preview(config_factory(name="random", max_trials=7))["summary"]["trials"][0]["count"] == 7
    )
    hparams = {"a": {"type": "int", "minval": 1, "maxval": 10, "count": 4}, "b": [1, 2]}
    grid = preview(config_factory(name="grid", hyperparameters=hparams))
    assert grid["summary"]["trials"] == [{"count": 4, "unit": {"maxLength": True}}]
    with pytest.raises(ValueError, match=r"searcher\.name"):
        preview(config_factory(name="bayes"))


def test_worked_example_per_bracket(asha_config_factory) -> None:
    # §2.7: each bracket alone (the totals above are their sum)
    def bracket(rungs: int, trials: int) -> list[tuple[int, int]]:
        config = asha_config_factory(max_trials=trials, max_time=1000, bracket_rungs=[rungs])
        return _units(preview(config))

    assert bracket(4, 70) == [(53, 15), (13, 62), (3, 250), (1, 1000)]
    assert bracket(3, 22) == [(17, 62), (4, 250), (1, 1000)]
    assert bracket(2, 8) == [(6, 250), (2, 1000)]
