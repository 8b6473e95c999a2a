"""Stopping-based ASHA (master-cli.md §2.5): every rule, driven event by event."""

from __future__ import annotations

import sys

import pytest

from determined.master.searchers import AsyncHalvingSearch, build_search_method
from determined.searcher import Create, ExitedReason, RandomState, SearchContext, Stop

HP = {"x": {"type": "double", "minval": 0, "maxval": 1}}


def _asha(**kw: object) -> tuple[AsyncHalvingSearch, SearchContext]:
    args = {
        "metric": "loss",
        "smaller_is_better": True,
        "time_metric": "batches",
        "max_time": 160,
        "num_rungs": 3,
        "max_trials": 100,
        "divisor": 4.0,
        "max_concurrent_trials": 16,
    }
    args.update(kw)
    return AsyncHalvingSearch(**args), SearchContext(RandomState(0), HP)  # type: ignore[arg-type]


def _new_trial(asha: AsyncHalvingSearch, ctx: SearchContext) -> str:
    request_id = ctx.create().request_id
    asha.trial_created(ctx, request_id)
    return request_id


def test_rungs_and_initial_trials() -> None:
    asha, ctx = _asha()
    assert [r.units_needed for r in asha.rungs] == [10, 40, 160]
    assert len(asha.initial_trials(ctx)) == 16
    assert len(_asha(max_concurrent_trials=0)[0].initial_trials(ctx)) == 16  # 4**2
    assert len(_asha(max_concurrent_trials=0, max_trials=5)[0].initial_trials(ctx)) == 5
    assert len(_asha(max_concurrent_trials=3)[0].initial_trials(ctx)) == 3
    assert [r.units_needed for r in _asha(max_time=2, num_rungs=4)[0].rungs] == [1, 1, 1, 2]


def test_rung_decisions_keep_one_then_two_then_three() -> None:
    asha, ctx = _asha()
    # Every new arrival is the best so far, so it goes on while its position < keep.
    for n in range(1, 16):
        request_id = _new_trial(asha, ctx)
        actions = asha.validation_completed(ctx, request_id, {"loss": 100.0 - n, "batches": 10})
        assert actions == [], n  # best so far always continues
        assert asha.trial_rungs[request_id] == 1
    # Now arrivals that rank exactly 2nd: continue only when keep >= 2 (from the 8th entry).
    asha, ctx = _asha()
    best = _new_trial(asha, ctx)
    asha.validation_completed(ctx, best, {"loss": 0.0, "batches": 10})
    for n in range(2, 13):
        request_id = _new_trial(asha, ctx)
        actions = asha.validation_completed(ctx, request_id, {"loss": 1.0 - n / 100, "batches": 10})
        stopped = any(isinstance(a, Stop) for a in actions)
        assert stopped == (n < 8), n
    # 12 entries: keep = 3, so a third-best arrival (13th entry -> keep 3) continues.
    request_id = _new_trial(asha, ctx)
    actions = asha.validation_completed(ctx, request_id, {"loss": 0.885, "batches": 10})
    ranks = [rid for rid, _ in asha.rungs[0].metrics]
    assert ranks.index(request_id) == 2 and actions == []


def test_equal_values_insert_before_existing_entries() -> None:
    asha, ctx = _asha()
    first, second = _new_trial(asha, ctx), _new_trial(asha, ctx)
    asha.validation_completed(ctx, first, {"loss": 1.0, "batches": 10})
    actions = asha.validation_completed(ctx, second, {"loss": 1.0, "batches": 10})
    assert [rid for rid, _ in asha.rungs[0].metrics] == [second, first]
    assert actions == []  # position 0 < keep 1


def test_one_report_can_pass_several_rungs_and_top_rung_stops() -> None:
    asha, ctx = _asha()
    request_id = _new_trial(asha, ctx)
    actions = asha.validation_completed(ctx, request_id, {"loss": 0.5, "batches": 160})
    assert [len(r.metrics) for r in asha.rungs] == [1, 1, 1]
    assert actions[0] == Stop(request_id)
    assert isinstance(actions[1], Create)  # replacement while under max_trials
    assert asha.rung_lengths(request_id) == [160]


def test_no_report_of_the_rung_length_means_no_decision() -> None:
    asha, ctx = _asha()
    request_id = _new_trial(asha, ctx)
    assert asha.validation_completed(ctx, request_id, {"loss": 0.5, "batches": 9.9}) == []
    assert asha.rung_lengths(request_id) == [10, 40, 160]


def test_stop_creates_only_while_under_max_trials() -> None:
    asha, ctx = _asha(max_trials=2)
    a, b = _new_trial(asha, ctx), _new_trial(asha, ctx)
    asha.validation_completed(ctx, a, {"loss": 0.0, "batches": 10})
    assert asha.validation_completed(ctx, b, {"loss": 1.0, "batches": 10}) == [Stop(b)]


def test_larger_is_better_negates_the_metric() -> None:
    asha, ctx = _asha(smaller_is_better=False)
    a, b = _new_trial(asha, ctx), _new_trial(asha, ctx)
    asha.validation_completed(ctx, a, {"loss": 0.9, "batches": 10})
    actions = asha.validation_completed(ctx, b, {"loss": 0.1, "batches": 10})
    assert actions[0] == Stop(b)
    assert asha.rungs[0].metrics[0] == (a, -0.9)


@pytest.mark.parametrize("reason", [ExitedReason.ERRORED, ExitedReason.USER_CANCELED])
def test_errored_or_canceled_recorded_worst_and_replaced(reason: ExitedReason) -> None:
    asha, ctx = _asha()
    a, b = _new_trial(asha, ctx), _new_trial(asha, ctx)
    asha.validation_completed(ctx, a, {"loss": 5.0, "batches": 10})
    actions = asha.trial_exited_early(ctx, b, reason)
    assert len(actions) == 1 and isinstance(actions[0], Create)
    assert asha.rungs[0].metrics[-1] == (b, sys.float_info.max)


def test_invalid_hp_removes_metrics_and_is_replaced() -> None:
    asha, ctx = _asha()
    a = _new_trial(asha, ctx)
    asha.validation_completed(ctx, a, {"loss": 0.1, "batches": 40})
    actions = asha.trial_exited_early(ctx, a, ExitedReason.INVALID_HP)
    assert actions[0] == Stop(a) and isinstance(actions[1], Create)
    assert [len(r.metrics) for r in asha.rungs] == [0, 0, 0]
    assert asha.invalid_trials == 1


def test_progress_formula() -> None:
    asha, ctx = _asha(max_trials=4)
    trials = [_new_trial(asha, ctx) for _ in range(4)]
    for i, request_id in enumerate(trials[:3]):
        asha.validation_completed(ctx, request_id, {"loss": float(i), "batches": 10})
    assert asha.progress({}, set()) == pytest.approx(3 / 4.8)
    asha.validation_completed(ctx, trials[3], {"loss": 9.0, "batches": 10})
    assert asha.progress({}, set()) == pytest.approx(4 / 4.8)
    for request_id in trials:
        asha.trial_exited(ctx, request_id)
    assert asha.progress({}, set()) == 1.0


@pytest.mark.parametrize(
    ("metrics", "message"),
    [
        ({"batches": 10}, "'loss' is missing"),
        ({"loss": "low", "batches": 10}, "'loss' must be a number"),
        ({"loss": True, "batches": 10}, "'loss' must be a number"),
        ({"loss": float("nan"), "batches": 10}, "'loss' must be a number"),
        ({"loss": 1.0}, "'batches' is missing"),
        ({"loss": 1.0, "batches": None}, "'batches' must be a number"),
        ({"loss": 1.0, "batches": -1}, "'batches' must be a finite number >= 0"),
    ],
)
def test_bad_metrics_raise_value_error(metrics: dict, message: str) -> None:
    asha, ctx = _asha()
    with pytest.raises(ValueError, match=message):
        asha.validation_completed(ctx, _new_trial(asha, ctx), metrics)


def test_infinite_metrics_survive_a_json_state() -> None:
    import json

    asha, ctx = _asha()
    a = _new_trial(asha, ctx)
    asha.validation_completed(ctx, a, {"loss": float("inf"), "batches": 10})
    state = json.loads(json.dumps(asha.state_dict(), allow_nan=False))
    twin, _ = _asha()
    twin.load_state_dict(state)
    assert twin.rungs[0].metrics == [(a, float("inf"))]


@pytest.mark.parametrize(
    "length_keys",
    [
        {"max_length": {"epochs": 160}},
        {"max_length": 160, "time_metric": "epochs"},
        {"time_metric": "epochs", "max_time": 160, "max_length": {"batches": 3}},
    ],
)
def test_config_length_forms(length_keys: dict) -> None:
    searcher = {"name": "async_halving", "metric": "loss", "num_rungs": 3, "max_trials": 8}
    method = build_search_method({"searcher": {**searcher, **length_keys}})
    assert isinstance(method, AsyncHalvingSearch)
    assert method.time_metric == "epochs" and method.max_time == 160
    assert method.max_concurrent_trials == 16 and method.divisor == 4.0


def test_config_errors_name_the_field() -> None:
    with pytest.raises(ValueError, match=r"searcher\.max_time"):
        build_search_method(
            {"searcher": {"name": "async_halving", "metric": "l", "num_rungs": 2, "max_trials": 3}}
        )
    with pytest.raises(ValueError, match=r"searcher\.num_rungs"):
        build_search_method(
            {
                "searcher": {
                    "name": "async_halving",
                    "metric": "l",
                    "max_trials": 3,
                    "time_metric": "batches",
                    "max_time": 10,
                }
            }
        )
    with pytest.raises(ValueError, match=r"searcher\.divisor"):
        build_search_method(
            {
                "searcher": {
                    "name": "async_halving",
                    "metric": "l",
                    "num_rungs": 2,
                    "max_trials": 3,
                    "time_metric": "b",
                    "max_time": 10,
                    "divisor": 1,
                }
            }
        )
    with pytest.raises(ValueError, match=r"searcher\.metric"):
        build_search_method(
            {
                "searcher": {
                    "name": "adaptive_asha",
                    "max_trials": 3,
                    "time_metric": "b",
                    "max_time": 10,
                }
            }
        )
    assert build_search_method({"searcher": {"name": "bayesian"}}) is None
