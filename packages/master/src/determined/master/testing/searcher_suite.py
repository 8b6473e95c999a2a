"""The conformance suite for search methods, and the simulated trials that drive a search.

A search method runs inside det-master's :class:`Searcher` (events in, actions out). Subclass the
suite in a test module with a name pytest collects; provide a ``config`` fixture (a complete
experiment config: ``searcher``, ``hyperparameters``, ``reproducibility.experiment_seed``), a
``make_method`` fixture (``config -> SearchMethod``) and the number of trials a full search of that
config creates::

    from determined.master.testing.searcher_suite import SearchMethodSuite

    class TestMySearch(SearchMethodSuite):
        expected_trials = 8

        @pytest.fixture
        def config(self):
            return {"searcher": {"name": "mine", "metric": "val_loss", ...}, ...}

        @pytest.fixture
        def make_method(self):
            return lambda config: MySearch(config["searcher"])

The trials are simulated by :class:`FakeTrialRunner`: each reports a validation at its next rung
length (or the full length) in round-robin, and exits once stopped or done.
"""

from __future__ import annotations

import collections
import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from determined.master.searchers import Searcher
from determined.searcher import Action, Create, ExitedReason, SearchMethod, Shutdown, Stop

MakeMethod = Callable[[dict[str, Any]], SearchMethod]
"""Builds a fresh search method for an experiment config."""


class FakeTrialRunner:
    """Drives a :class:`Searcher` the way the master does, with simulated trials.

    Trials run in round-robin: each reports a validation (``metric``) at its next rung length (or
    ``max_time``), and exits once stopped or done. ``fail`` picks trials that exit early (with the
    returned reason) at their first turn.
    """

    def __init__(
        self,
        searcher: Searcher,
        max_time: int = 100,
        metric: Callable[[Create, int], float] | None = None,
        fail: Callable[[Create], ExitedReason | None] | None = None,
        *,
        metric_name: str = "val_loss",
        time_metric: str = "batches",
    ) -> None:
        self.searcher = searcher
        self.max_time = max_time
        self.metric = metric or (lambda create, length: (create.trial_seed % 9973) / 9973.0)
        self.fail = fail or (lambda create: None)
        self.metric_name = metric_name
        self.time_metric = time_metric
        self.pending: collections.deque[Create] = collections.deque()
        self.running: collections.deque[str] = collections.deque()
        self.creates: dict[str, Create] = {}
        self.reported: dict[str, int] = {}
        self.stopped: set[str] = set()
        self.shutdown: Shutdown | None = None
        self.log: list[Action] = []
        self.lengths: dict[str, int] = {}

    def apply(self, actions: list[Action]) -> None:
        """Record the searcher's actions: queue creates, note stops and the shutdown."""
        for action in actions:
            self.log.append(action)
            if isinstance(action, Create):
                self.pending.append(action)
                self.creates[action.request_id] = action
            elif isinstance(action, Stop):
                self.stopped.add(action.request_id)
            else:
                self.shutdown = action

    def start(self) -> FakeTrialRunner:
        """Ask for the initial trials."""
        self.apply(self.searcher.initial_trials())
        return self

    @property
    def done(self) -> bool:
        return not self.pending and not self.running

    def step(self) -> None:
        """One event: a pending trial is created, or a running one reports or exits."""
        if self.pending:
            create = self.pending.popleft()
            self.apply(self.searcher.trial_created(create.request_id))
            self.running.append(create.request_id)
            self.reported[create.request_id] = 0
            return
        request_id = self.running.popleft()
        create = self.creates[request_id]
        reason = self.fail(create)
        if reason is not None:
            self.apply(self.searcher.trial_exited_early(request_id, reason))
            self.apply(self.searcher.trial_exited(request_id))
            return
        lengths = self.searcher.rung_lengths(request_id) or [self.max_time]
        upcoming = [n for n in lengths if n > self.reported[request_id]]
        if request_id in self.stopped or not upcoming:
            self.lengths[request_id] = self.reported[request_id]
            self.apply(self.searcher.trial_exited(request_id))
            return
        length = upcoming[0]
        self.reported[request_id] = length
        metrics = {self.metric_name: self.metric(create, length), self.time_metric: length}
        self.apply(self.searcher.validation_completed(request_id, metrics))
        self.searcher.set_trial_progress(request_id, length / self.max_time)
        self.running.append(request_id)

    def run(self, max_steps: int = 100_000, monotonic: bool = False) -> FakeTrialRunner:
        """Step until no trial is left; ``monotonic`` checks that progress never decreases
        (true for ASHA; random and grid average over trials, so a new trial lowers the mean)."""
        progress = self.searcher.progress()
        for _ in range(max_steps):
            if self.done:
                return self
            self.step()
            assert not monotonic or self.searcher.progress() >= progress, "progress went back"
            progress = self.searcher.progress()
        raise AssertionError("search did not finish")

    def fork(self, searcher: Searcher) -> FakeTrialRunner:
        """A copy of this runner's state driving ``searcher``."""
        twin = copy.copy(self)
        for name in ("pending", "running", "creates", "reported", "stopped", "log", "lengths"):
            setattr(twin, name, copy.deepcopy(getattr(self, name)))
        twin.searcher = searcher
        return twin


def _creates(actions: list[Action]) -> list[Create]:
    return [a for a in actions if isinstance(a, Create)]


class SearchMethodSuite:
    """Tests every search method must pass, through det-master's :class:`Searcher`.

    The subclass provides the ``config`` and ``make_method`` fixtures and sets
    ``expected_trials``; ``max_time`` is the full training length of its config.
    """

    expected_trials: int
    """How many trials a full search of ``config`` creates (when no trial exits early)."""
    max_time = 100
    """The full length a trial trains for when the method names no rung lengths."""
    finishes_at_full_progress = True
    """Whether ``progress()`` is 1.0 once the search shut down."""

    def searcher(self, config: dict[str, Any], make_method: MakeMethod) -> Searcher:
        """A fresh Searcher on a fresh method (the config is copied: methods may keep it)."""
        config = copy.deepcopy(config)
        return Searcher(config, method=make_method(config))

    def runner(self, searcher: Searcher, **kwargs: Any) -> FakeTrialRunner:
        return FakeTrialRunner(searcher, self.max_time, **kwargs)

    # ------------------------------------------------------------------------------ trials

    def test_initial_trials_are_creates_with_the_hyperparameters(
        self, config: dict[str, Any], make_method: MakeMethod
    ) -> None:
        actions = self.searcher(config, make_method).initial_trials()
        creates = _creates(actions)
        assert creates, f"no initial trial: {actions}"
        assert len({c.request_id for c in creates}) == len(creates)
        for create in creates:
            assert set(config.get("hyperparameters") or {}) <= set(create.hparams)
            json.dumps(create.to_dict())

    def test_a_full_search_creates_the_expected_trials_and_shuts_down(
        self, config: dict[str, Any], make_method: MakeMethod
    ) -> None:
        runner = self.runner(self.searcher(config, make_method)).start().run()
        creates = _creates(runner.log)
        assert len(creates) == self.expected_trials
        assert len({c.request_id for c in creates}) == len(creates)
        created = set()
        for action in runner.log:  # a stop names a trial created before it
            if isinstance(action, Create):
                created.add(action.request_id)
            elif isinstance(action, Stop):
                assert action.request_id in created, action
        shutdowns = [a for a in runner.log if isinstance(a, Shutdown)]
        assert shutdowns == [Shutdown(cancel=False, failure=False)]
        assert runner.log[-1] == shutdowns[0], "an action came after the shutdown"
        progress = runner.searcher.progress()
        assert 0.0 <= progress <= 1.0
        if self.finishes_at_full_progress:
            assert progress == pytest.approx(1.0)

    def test_deterministic_for_a_seed(
        self, config: dict[str, Any], make_method: MakeMethod
    ) -> None:
        first = self.runner(self.searcher(config, make_method)).start().run()
        second = self.runner(self.searcher(config, make_method)).start().run()
        assert second.log == first.log
        assert second.searcher.state_dict() == first.searcher.state_dict()

    @pytest.mark.parametrize("steps", [1, 7, 23])
    def test_state_round_trip_mid_search_gives_the_same_future(
        self, steps: int, config: dict[str, Any], make_method: MakeMethod
    ) -> None:
        original = self.runner(self.searcher(config, make_method)).start()
        for _ in range(steps):
            if not original.done:
                original.step()
        state = json.loads(json.dumps(original.searcher.state_dict(), allow_nan=False))
        restored_searcher = self.searcher(config, make_method)
        restored_searcher.load_state_dict(state)
        assert restored_searcher.state_dict() == state
        restored = original.fork(restored_searcher)
        original.run()
        restored.run()
        assert restored.log == original.log
        assert restored.searcher.state_dict() == original.searcher.state_dict()
        assert restored.shutdown == Shutdown()

    # ------------------------------------------------------------------------------ early exits

    def test_search_ends_as_failed_when_every_trial_errors(
        self, config: dict[str, Any], make_method: MakeMethod
    ) -> None:
        runner = self.runner(
            self.searcher(config, make_method), fail=lambda create: ExitedReason.ERRORED
        )
        runner.start().run()
        assert runner.shutdown == Shutdown(cancel=False, failure=True)
        assert 1 <= len(runner.creates) <= self.expected_trials

    def test_search_completes_when_some_trials_exit_early(
        self, config: dict[str, Any], make_method: MakeMethod
    ) -> None:
        reasons = [None, ExitedReason.ERRORED, ExitedReason.USER_CANCELED, None]
        chosen: dict[str, ExitedReason | None] = {}

        def fail(create: Create) -> ExitedReason | None:
            # at a trial's first turn: the second, sixth, ... trial errors, the third, seventh, ...
            # is canceled
            if create.request_id not in chosen:
                chosen[create.request_id] = reasons[len(chosen) % len(reasons)]
                return chosen[create.request_id]
            return None

        runner = self.runner(self.searcher(config, make_method), fail=fail).start().run()
        assert runner.shutdown is not None and not runner.shutdown.failure
        assert 1 <= len(runner.creates) <= self.expected_trials
        assert runner.log[-1] == runner.shutdown
