"""The Searcher wrapper: completion rule, snapshot/restore, plugins and third-party methods."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Set
from typing import Any

import pytest

from determined.core import _hooks
from determined.core._markers import hookimpl
from determined.master.searchers import Searcher, _plugin
from determined.master.testing.searcher_suite import SearchMethodSuite
from determined.searcher import (
    Action,
    Create,
    ExitedReason,
    SearchContext,
    SearchMethod,
    Shutdown,
    Stop,
)


@pytest.fixture
def plugins(monkeypatch: pytest.MonkeyPatch) -> None:
    """The real plugin manager with det-master's searchers registered (entry points off)."""
    monkeypatch.setenv("DET_DISABLE_PLUGIN_AUTOLOAD", "1")
    _hooks.register(_plugin)


def _start(searcher: Searcher) -> list[Create]:
    creates = [a for a in searcher.initial_trials() if isinstance(a, Create)]
    for create in creates:
        searcher.trial_created(create.request_id)
    return creates


def test_completion_all_failed(config_factory, build_searcher) -> None:
    searcher = build_searcher(config_factory(name="random", max_trials=2, max_concurrent_trials=2))
    a, b = _start(searcher)
    assert searcher.trial_exited_early(a.request_id, ExitedReason.ERRORED) == []
    assert searcher.trial_exited_early(a.request_id, ExitedReason.ERRORED) == []  # duplicate
    assert searcher.trial_exited(a.request_id) == []
    searcher.trial_exited_early(b.request_id, ExitedReason.ERRORED)
    assert searcher.trial_exited(b.request_id) == [Shutdown(cancel=False, failure=True)]


def test_completion_all_canceled_and_mixed(config_factory, build_searcher) -> None:
    searcher = build_searcher(config_factory(name="random", max_trials=2, max_concurrent_trials=2))
    a, b = _start(searcher)
    for create in (a, b):
        searcher.trial_exited_early(create.request_id, ExitedReason.USER_CANCELED)
    searcher.trial_exited(a.request_id)
    assert searcher.trial_exited(b.request_id) == [Shutdown(cancel=True, failure=False)]

    mixed = build_searcher(config_factory(name="random", max_trials=2, max_concurrent_trials=2))
    a, b = _start(mixed)
    mixed.trial_exited_early(a.request_id, ExitedReason.ERRORED)
    mixed.trial_exited(a.request_id)
    assert mixed.trial_exited(b.request_id) == [Shutdown(cancel=False, failure=False)]


def test_asha_failures_are_replaced_and_search_completes(
    asha_config_factory, build_searcher, runner_factory
) -> None:
    searcher = build_searcher(asha_config_factory(max_trials=16))
    failing = {}

    def fail(create: Create) -> ExitedReason | None:
        if create.trial_seed % 5 == 0 and create.request_id not in failing:
            failing[create.request_id] = True
            return ExitedReason.ERRORED
        return None

    runner = runner_factory(searcher, fail=fail).start().run(monotonic=True)
    creates = [a for a in runner.log if isinstance(a, Create)]
    assert len(creates) == 16
    assert runner.shutdown == Shutdown(cancel=False, failure=False)
    assert searcher.progress() == 1.0


def test_progress_is_bounded(config_factory, build_searcher) -> None:
    searcher = build_searcher(config_factory(name="random", max_trials=2, max_concurrent_trials=2))
    assert searcher.progress() == 0.0
    a, _b = _start(searcher)
    searcher.set_trial_progress(a.request_id, 0.5)
    assert searcher.progress() == 0.25
    searcher.trial_exited(a.request_id)
    assert searcher.progress() == 0.5


def test_builtin_methods_through_the_hook(plugins, asha_config_factory) -> None:
    searcher = Searcher(asha_config_factory(max_trials=100, max_time=1000))
    assert len(searcher.initial_trials()) == 16
    with pytest.raises(ValueError, match=r"searcher\.name"):
        Searcher({"searcher": {"name": "no-such-searcher"}})


class FixedListSearch(SearchMethod):
    """A third-party method: tries the listed learning rates one by one, stops at a target loss."""

    def __init__(self, lrs: list[float], target: float) -> None:
        self.lrs = lrs
        self.target = target
        self.next_index = 0
        self.best: float | None = None

    def _next(self, ctx: SearchContext) -> list[Action]:
        if self.next_index >= len(self.lrs) or (self.best is not None and self.best < self.target):
            return []
        hparams = {**ctx.sample_hparams(), "lr": self.lrs[self.next_index]}
        self.next_index += 1
        return [ctx.create(hparams)]

    def initial_trials(self, ctx: SearchContext) -> list[Action]:
        return self._next(ctx)

    def validation_completed(
        self, ctx: SearchContext, request_id: str, metrics: Mapping[str, Any]
    ) -> list[Action]:
        loss = float(metrics["val_loss"])
        self.best = loss if self.best is None else min(self.best, loss)
        return [Stop(request_id)]

    def trial_exited(self, ctx: SearchContext, request_id: str) -> list[Action]:
        return self._next(ctx)

    def progress(self, trial_progress: Mapping[str, float], trials_closed: Set[str]) -> float:
        return len(trials_closed) / len(self.lrs)

    def state_dict(self) -> dict[str, Any]:
        return {"next_index": self.next_index, "best": self.best}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.next_index = state["next_index"]
        self.best = state["best"]


class FixedListPlugin:
    @hookimpl
    def det_search_method(self, config: dict[str, Any]) -> SearchMethod | None:
        searcher = config["searcher"]
        if searcher["name"] != "test_fixed_list":
            return None
        return FixedListSearch(searcher["lrs"], searcher["target"])


class TestFixedListSearchConformance(SearchMethodSuite):
    """A third-party method passes the same conformance suite as the built-in ones."""

    expected_trials = 4  # the target is never reached: every listed rate is tried

    @pytest.fixture
    def config(self, config_factory) -> dict[str, Any]:
        return config_factory(name="test_fixed_list", lrs=[0.3, 0.1, 0.03, 0.01], target=-1.0)

    @pytest.fixture
    def make_method(self) -> Callable[[dict[str, Any]], SearchMethod]:
        return lambda config: FixedListSearch(
            config["searcher"]["lrs"], config["searcher"]["target"]
        )


def test_third_party_method_through_the_wrapper(plugins, config_factory, runner_factory) -> None:
    _hooks.register(FixedListPlugin(), name="test-fixed-list-searcher")
    config = config_factory(name="test_fixed_list", lrs=[0.3, 0.1, 0.03, 0.01], target=0.2)
    searcher = Searcher(config)
    assert isinstance(searcher.method, FixedListSearch)
    runner = runner_factory(searcher, metric=lambda create, length: create.hparams["lr"] * 2)
    runner.start().run()
    lrs = [a.hparams["lr"] for a in runner.log if isinstance(a, Create)]
    assert lrs == [0.3, 0.1, 0.03]  # 0.1 * 2 = 0.2 is not below the target; 0.06 is
    assert runner.shutdown == Shutdown()
    assert searcher.progress() == 0.75
    # built-in names still reach det-master's plugin
    assert type(Searcher(config_factory(name="single")).method).__name__ == "RandomSearch"


# ---- reports after a Stop, repeated lengths, and the operations protocol ----------------------


def _asha_searcher(asha_config_factory, build_searcher, **kw: Any) -> tuple[Searcher, list[str]]:
    searcher = build_searcher(asha_config_factory(**kw))
    return searcher, [c.request_id for c in _start(searcher)]


def test_a_stopped_trial_reports_nothing_more(asha_config_factory, build_searcher) -> None:
    searcher, (a, b, *_) = _asha_searcher(asha_config_factory, build_searcher)
    searcher.validation_completed(a, {"val_loss": 0.1, "batches": 6})
    actions = searcher.validation_completed(b, {"val_loss": 0.9, "batches": 6})
    assert actions[0] == Stop(b) and isinstance(actions[1], Create)
    requested = searcher.trials_requested
    # the stopped trial's late (or repeated) reports: upstream ranked them again and created
    # another trial for each
    assert searcher.validation_completed(b, {"val_loss": 0.9, "batches": 6}) == []
    assert searcher.validation_completed(b, {"val_loss": 0.8, "batches": 25}) == []
    assert searcher.trials_requested == requested
    rungs = searcher.state_dict()["search_method_state"]["sub_search_states"][0]["rungs"]
    assert [m["request_id"] for m in rungs[0]["metrics"]] == [a, b]


def test_each_length_is_judged_once(asha_config_factory, build_searcher) -> None:
    searcher, (a, *_) = _asha_searcher(asha_config_factory, build_searcher)
    searcher.validation_completed(a, {"val_loss": 0.5, "batches": 3})  # below the first rung
    searcher.validation_completed(a, {"val_loss": 0.5, "batches": 6})
    assert searcher.validated_time[a] == 6.0
    # a restarted trial re-reporting, and the completed operation of the same length
    assert searcher.validation_completed(a, {"val_loss": 0.4, "batches": 6}) == []
    assert searcher.operation_completed(a, 6, 0.3) == []
    rungs = searcher.state_dict()["search_method_state"]["sub_search_states"][0]["rungs"]
    assert [m["metric"] for m in rungs[0]["metrics"]] == [0.5]


def test_operations_follow_the_rungs(asha_config_factory, build_searcher) -> None:
    searcher, ids = _asha_searcher(asha_config_factory, build_searcher)
    a, b = ids[0], ids[-1]  # a: 3-rung bracket [6, 25, 100]; b: 2-rung bracket [25, 100]
    assert searcher.next_operation(a) == 6 and searcher.next_operation(b) == 25
    assert searcher.operation_completed(a, 6, 0.5) == []  # best so far: promoted
    assert searcher.next_operation(a) == 25
    # a trial on the protocol may report validations without the searcher's metrics
    assert searcher.validation_completed(a, {"accuracy": 0.3}) == []
    assert searcher.validation_completed(a, {"val_loss": 0.3}) == []
    assert searcher.operation_completed(a, 25, 0.4) == []
    assert searcher.operation_completed(a, 100, 0.2)[0] == Stop(a)
    assert searcher.next_operation(a) is None
    # state survives a restart
    twin = build_searcher(asha_config_factory())
    twin.load_state_dict(json.loads(json.dumps(searcher.state_dict())))
    assert twin.state_dict() == searcher.state_dict()
    assert twin.next_operation(a) is None and twin.next_operation(b) == 25
    # a trial not on the protocol must still report the searcher's metrics, as upstream
    with pytest.raises(ValueError, match="'batches' is missing"):
        searcher.validation_completed(ids[1], {"val_loss": 0.3})


def test_operations_of_full_length_searchers(config_factory, build_searcher) -> None:
    searcher = build_searcher(
        config_factory(name="random", max_trials=1, time_metric="epochs", max_time=3)
    )
    (create,) = _start(searcher)
    assert searcher.next_operation(create.request_id) == 3
    assert searcher.operation_completed(create.request_id, 3, 1.0) == []
    assert searcher.next_operation(create.request_id) is None
    single = build_searcher(config_factory(name="single"))
    (create,) = _start(single)
    with pytest.raises(ValueError, match=r"searcher\.max_length"):
        single.next_operation(create.request_id)
