"""A fake trial runner that drives a Searcher the way the master does, and config builders."""

from __future__ import annotations

import collections
import copy
from collections.abc import Callable
from typing import Any

import pytest

from determined.master.searchers import Searcher, build_search_method
from determined.searcher import Action, Create, ExitedReason, Shutdown, Stop

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


class FakeTrialRunner:
    """Runs trials in round-robin: each reports a validation at its next rung length (or the full
    length), exits once stopped or done. ``fail`` picks trials that error at their first turn."""

    def __init__(
        self,
        searcher: Searcher,
        max_time: int = 100,
        metric: Callable[[Create, int], float] | None = None,
        fail: Callable[[Create], ExitedReason | None] | None = None,
    ) -> None:
        self.searcher = searcher
        self.max_time = max_time
        self.metric = metric or (lambda create, length: (create.trial_seed % 9973) / 9973.0)
        self.fail = fail or (lambda create: None)
        self.pending: collections.deque[Create] = collections.deque()
        self.running: collections.deque[str] = collections.deque()
        self.creates: dict[str, Create] = {}
        self.reported: dict[str, int] = {}
        self.stopped: set[str] = set()
        self.shutdown: Shutdown | None = None
        self.log: list[Action] = []
        self.lengths: dict[str, int] = {}

    def apply(self, actions: list[Action]) -> None:
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
        self.apply(self.searcher.initial_trials())
        return self

    @property
    def done(self) -> bool:
        return not self.pending and not self.running

    def step(self) -> None:
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
        metrics = {"val_loss": self.metric(create, length), "batches": length}
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
