"""The interface every hyperparameter search method implements.

A search method is a pure state machine: the master tells it what happened to its trials (events in)
and it answers with what to do next (:class:`Create`, :class:`Stop`, :class:`Shutdown` out). It never
talks to a database or a trial; the master's ``Searcher`` wrapper applies its actions, counts trials
and exits, decides when the whole search is over, and persists :meth:`SearchMethod.state_dict`
after every batch of actions.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Set
from typing import Any

from determined.searcher._actions import Action, Create, ExitedReason
from determined.searcher._nprand import RandomState
from determined.searcher._sampling import new_create, sample_hparams


class SearchContext:
    """What a search method may use while handling an event: the seeded RNG and the search space.

    The wrapper passes a context to every callback; its RNG state is owned and persisted by the
    wrapper, so a method that draws only from ``ctx.rng`` is reproducible and restorable for free.

    Attributes:
        rng: the experiment's generator, seeded with ``reproducibility.experiment_seed``.
        hyperparameters: the experiment config's ``hyperparameters`` section.
    """

    def __init__(self, rng: RandomState, hyperparameters: Mapping[str, Any]) -> None:
        self.rng = rng
        self.hyperparameters = hyperparameters

    def sample_hparams(self) -> dict[str, Any]:
        """Draw one random point of the search space (see ``determined.searcher.sample_hparams``)."""
        return sample_hparams(self.hyperparameters, self.rng)

    def create(self, hparams: dict[str, Any] | None = None) -> Create:
        """A :class:`Create` for ``hparams``, or for a fresh random sample when ``None``.

        Draw order matches upstream: the sample first, then the request id, then the trial seed.
        """
        if hparams is None:
            hparams = self.sample_hparams()
        return new_create(self.rng, hparams)


class SearchMethod(abc.ABC):
    """Base class of hyperparameter search methods (random, grid, ASHA, ... or your own).

    Call order for one trial: ``initial_trials`` (once per search) or another callback returns a
    :class:`Create`; the master builds the trial and calls :meth:`trial_created`; every validation
    the trial reports reaches :meth:`validation_completed`; if the trial errors or is canceled
    :meth:`trial_exited_early` comes first, and :meth:`trial_exited` is always the last call for it.
    Every callback returns a list of actions (possibly empty). Request ids are the strings of the
    :class:`Create` actions.

    You do not decide when the search ends: the wrapper emits :class:`Shutdown` once every requested
    trial has exited, so to finish a search simply stop creating trials. Emit ``Shutdown`` yourself
    only to end a search early.

    State: keep everything that must survive a master restart in :meth:`state_dict` (JSON-ready
    data). The master rebuilds the method from the experiment config and calls
    :meth:`load_state_dict`; the restored method must then behave exactly as the original.

    To publish a method, implement the ``det_search_method`` hook in a plugin and return an instance
    when ``config["searcher"]["name"]`` is yours.
    """

    @abc.abstractmethod
    def initial_trials(self, ctx: SearchContext) -> list[Action]:
        """Called once when the search starts; returns the first :class:`Create` actions.

        Args:
            ctx: the RNG and search space.

        Returns:
            The actions to apply, usually ``max_concurrent_trials`` creates.
        """

    def trial_created(self, ctx: SearchContext, request_id: str) -> list[Action]:
        """Called when the master has built the trial for a :class:`Create` (default: nothing)."""
        return []

    def validation_completed(
        self, ctx: SearchContext, request_id: str, metrics: Mapping[str, Any]
    ) -> list[Action]:
        """Called with every validation a trial reports (default: nothing).

        Args:
            ctx: the RNG and search space.
            request_id: the trial that reported.
            metrics: the reported validation metrics (the searcher metric, the time metric, ...).

        Returns:
            Actions, e.g. :class:`Stop` for this trial and a replacement :class:`Create`.

        Raises:
            ValueError: a metric the method needs is missing or not a number; the experiment fails.
        """
        return []

    @abc.abstractmethod
    def trial_exited(self, ctx: SearchContext, request_id: str) -> list[Action]:
        """Called when a trial's process is gone for good, whatever the reason (last call for it)."""

    def trial_exited_early(
        self, ctx: SearchContext, request_id: str, reason: ExitedReason
    ) -> list[Action]:
        """Called before :meth:`trial_exited` when a trial errored or was canceled (default: nothing).

        The wrapper ignores a second early exit of the same trial, so this runs once per trial.
        """
        return []

    @abc.abstractmethod
    def progress(self, trial_progress: Mapping[str, float], trials_closed: Set[str]) -> float:
        """The search's progress in ``[0, 1]``.

        Args:
            trial_progress: each created trial's reported progress (0..1), by request id; trials
                whose hyperparameters were invalid are left out.
            trials_closed: the request ids of trials that have exited.
        """

    def rung_lengths(self, request_id: str) -> list[int] | None:
        """The training lengths (in the time metric) at which the trial will next be judged.

        ``None`` (the default) means the method plans no lengths; ASHA returns its rungs from the
        trial's current one up to the full length.
        """
        return None

    @abc.abstractmethod
    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume the search, as JSON-ready data (no RNG: the wrapper has it).

        Return fresh containers, not references to the method's own: the master snapshots this
        after every batch of actions and does not copy it (a deep copy cost more than the search).
        """

    @abc.abstractmethod
    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a state produced by :meth:`state_dict` on a method built from the same config."""
