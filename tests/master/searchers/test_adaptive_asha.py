"""Adaptive ASHA: brackets, concurrency and rungs per the worked examples (master-cli.md §2.6-2.7)."""

from __future__ import annotations

import pytest

from determined.master.searchers import (
    Bracket,
    bracket_max_concurrent_trials,
    bracket_max_trials,
    make_brackets,
    rung_units,
)
from determined.searcher import Create


def test_bracket_max_trials_examples() -> None:
    assert bracket_max_trials(20, 3.0, [3, 2, 1]) == [12, 5, 3]
    assert bracket_max_trials(100, 4.0, [4, 3, 2]) == [70, 22, 8]
    assert bracket_max_trials(50, 3.0, [4, 3]) == [35, 15]
    assert bracket_max_trials(50, 4.0, [3, 2]) == [37, 13]


def test_bracket_concurrency_examples() -> None:
    assert bracket_max_concurrent_trials(11, 3.0, [9, 3, 1]) == [4, 4, 3]
    assert bracket_max_concurrent_trials(0, 4.0, [40, 10]) == [10, 10]
    assert bracket_max_concurrent_trials(0, 3.0, [9, 3, 1]) == [3, 3, 3]
    assert bracket_max_concurrent_trials(16, 4.0, [70, 22, 8]) == [6, 5, 5]
    assert bracket_max_concurrent_trials(1, 4.0, [70, 22, 8]) == [1, 1, 1]


def _brackets(**kw: object) -> list[Bracket]:
    args = {
        "max_trials": 100,
        "max_time": 1000,
        "divisor": 4.0,
        "mode": "standard",
        "max_rungs": 5,
        "bracket_rungs": [],
        "max_concurrent_trials": 16,
    }
    args.update(kw)
    return make_brackets(**args)  # type: ignore[arg-type]


def test_worked_example_brackets_and_rungs() -> None:
    assert _brackets() == [Bracket(4, 70, 6), Bracket(3, 22, 5), Bracket(2, 8, 5)]
    assert rung_units(4, 4.0, 1000) == [15, 62, 250, 1000]
    assert rung_units(3, 4.0, 1000) == [62, 250, 1000]
    assert rung_units(2, 4.0, 1000) == [250, 1000]


def test_smaller_worked_example() -> None:
    assert _brackets(max_time=100, max_trials=16) == [Bracket(3, 12, 8), Bracket(2, 4, 8)]
    assert rung_units(3, 4.0, 100) == [6, 25, 100]
    assert rung_units(2, 4.0, 100) == [25, 100]


def test_modes_and_explicit_bracket_rungs() -> None:
    assert [b.num_rungs for b in _brackets(mode="aggressive")] == [4]
    assert [b.num_rungs for b in _brackets(mode="conservative")] == [4, 3, 2, 1]
    assert [b.num_rungs for b in _brackets(bracket_rungs=[2, 5, 3])] == [5, 3, 2]
    # upstream's TestMakeBrackets cases
    assert _brackets(max_time=100, max_trials=10, max_concurrent_trials=2) == [
        Bracket(2, 7, 1),
        Bracket(1, 3, 1),
    ]
    assert _brackets(
        mode="conservative", max_time=1000, divisor=3.0, max_concurrent_trials=5, max_trials=10
    ) == [Bracket(3, 7, 2), Bracket(2, 2, 2), Bracket(1, 1, 1)]
    with pytest.raises(ValueError, match=r"searcher\.mode"):
        _brackets(mode="wild")


def test_initial_creates_split_over_brackets(asha_config_factory, build_searcher) -> None:
    searcher = build_searcher(asha_config_factory(max_trials=100, max_time=1000))
    actions = searcher.initial_trials()
    assert len(actions) == 16 and all(isinstance(a, Create) for a in actions)
    lengths = [searcher.rung_lengths(a.request_id) for a in actions]
    assert lengths == [[15, 62, 250, 1000]] * 6 + [[62, 250, 1000]] * 5 + [[250, 1000]] * 5

    small = build_searcher(asha_config_factory())
    actions = small.initial_trials()
    assert [len(small.rung_lengths(a.request_id) or []) for a in actions] == [3] * 8 + [2] * 4


def test_full_search_runs_every_trial_and_shuts_down(
    asha_config_factory, build_searcher, runner_factory
) -> None:
    searcher = build_searcher(asha_config_factory(max_trials=100, max_time=1000))
    runner = runner_factory(searcher, max_time=1000).start().run(monotonic=True)
    creates = [a for a in runner.log if isinstance(a, Create)]
    assert len(creates) == 100
    assert runner.shutdown is not None and not runner.shutdown.failure
    assert runner.log[-1] == runner.shutdown
    assert searcher.progress() == 1.0
    # every trial trained to one of the rung lengths and at least one per bracket reached the top
    assert set(runner.lengths.values()) <= {15, 62, 250, 1000}
    assert sum(1 for n in runner.lengths.values() if n == 1000) >= 3


def test_worked_example_rung_count() -> None:
    from determined.master.searchers._adaptive_asha import bracket_rungs_for_mode, max_rungs_for

    # R = min(5, floor(ln 1000 / ln 4) + 1 = 5, floor(ln 100 / ln 4) + 1 = 4) = 4
    assert max_rungs_for(5, 1000, 4.0, 100) == 4
    assert max_rungs_for(5, 100, 4.0, 16) == 3  # the smaller case
    assert max_rungs_for(2, 1000, 4.0, 100) == 2  # max_rungs caps it
    assert max_rungs_for(5, 64, 4.0, 1000) == 4  # ln 64 / ln 4 = 3 exactly: + 1
    assert bracket_rungs_for_mode("standard", 4) == [2, 3, 4]
    assert bracket_rungs_for_mode("standard", 5) == [3, 4, 5]
    assert bracket_rungs_for_mode("conservative", 3) == [1, 2, 3]
    assert bracket_rungs_for_mode("aggressive", 3) == [3]


def test_worked_example_initial_trials_per_bracket(asha_config_factory, build_searcher) -> None:
    searcher = build_searcher(asha_config_factory(max_trials=100, max_time=1000))
    actions = searcher.initial_trials()
    table = searcher.method.trial_table  # request id -> bracket index
    assert [table[a.request_id] for a in actions] == [0] * 6 + [1] * 5 + [2] * 5
