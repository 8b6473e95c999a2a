"""Upstream's ``Dummy*`` classes and ``SearcherContextMissing``, kept so Determined code runs unchanged.

Upstream had a "Dummy" twin of every context for off-cluster use, overriding most methods. det has
one implementation of each context, parameterised by a backend: each class here is a subclass that
only chooses the local backend in its constructor (upstream's constructor signature) and overrides
no behaviour, so ``isinstance`` and subclassing work and nothing can drift apart.
"""

from __future__ import annotations

import pathlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, NoReturn

from determined.core._checkpoint import CheckpointContext
from determined.core._distributed import DistributedContext
from determined.core._experimental import ExperimentalCoreContext
from determined.core._local_backend import LocalBackend
from determined.core._preempt import PreemptContext, PreemptMode
from determined.core._profiler import ProfilerContext
from determined.core._searcher import SearcherContext, SearcherMode, SearcherOperation, Unit
from determined.core._tensorboard import TensorboardMode, default_tensorboard_path
from determined.core._train import TrainContext

if TYPE_CHECKING:
    from determined.storage import StorageManager


class DummyDistributedContext(DistributedContext):
    """A single-process DistributedContext (rank 0 of 1, no sockets)."""

    def __init__(self) -> None:
        super().__init__(rank=0, size=1, local_rank=0, local_size=1, cross_rank=0, cross_size=1)


class DummyCheckpointContext(CheckpointContext):
    """A CheckpointContext that stores checkpoints in ``storage_manager`` and reports them to no
    master (their metadata is read back from storage)."""

    def __init__(self, dist: DistributedContext, storage_manager: StorageManager) -> None:
        super().__init__(dist, storage_manager, LocalBackend(storage_manager), task_id="local")


class DummyTrainContext(TrainContext):
    """A TrainContext whose reports are logged; ``tensorboard_path`` is where TensorBoard files go."""

    def __init__(self, tensorboard_path: pathlib.Path | None = None) -> None:
        super().__init__(
            LocalBackend(),
            trial_id=0,
            run_id=0,
            exp_id=0,
            tensorboard_mode=TensorboardMode.MANUAL,
            tensorboard_path=tensorboard_path or default_tensorboard_path(None, 0),
        )


class DummySearcherContext(SearcherContext):
    """A SearcherContext handing out one operation of ``length`` (in epochs, as upstream's)."""

    def __init__(self, dist: DistributedContext, length: int = 1) -> None:
        super().__init__(LocalBackend(), dist, 0, max_length=length, units=Unit.EPOCHS)


class DummySearcherOperation(SearcherOperation):
    """A SearcherOperation of ``length`` that belongs to no searcher (its report only logs)."""

    def __init__(self, length: int, is_chief: bool) -> None:
        super().__init__(DummySearcherContext(DummyDistributedContext(), length), length, is_chief)


class DummyPreemptContext(PreemptContext):
    """A PreemptContext with no signal source: ``should_preempt()`` is always False, with the same
    synchronisation between ranks (and the same errors) as the real one."""

    def __init__(
        self, dist: DistributedContext, preempt_mode: PreemptMode = PreemptMode.WorkersAskChief
    ) -> None:
        super().__init__(dist, [], LocalBackend(), None, PreemptMode(preempt_mode))


class DummyProfilerContext(ProfilerContext):
    """A ProfilerContext whose samples are discarded."""

    def __init__(self) -> None:
        super().__init__(lambda group, metrics: None, "local", local_rank=0)


class DummyExperimentalCoreContext(ExperimentalCoreContext):
    """An ExperimentalCoreContext that records nothing."""

    def __init__(self) -> None:
        super().__init__(LocalBackend(), None)


_SEARCHER_MISSING = (
    "SearcherContext was not created because the experiment config does not set "
    "searcher.max_length. Both searcher.max_length and the SearcherContext are deprecated: set the "
    "training length in the training code and do not call core_context.searcher."
)


class SearcherContextMissing(SearcherContext):
    """The ``searcher`` of a context built without a searcher length: every method raises
    ``ValueError`` saying so (upstream's stand-in for a missing ``searcher.max_length``)."""

    def __init__(self) -> None:
        super().__init__(LocalBackend(), DummyDistributedContext(), 0, max_length=None)

    def operations(
        self, searcher_mode: SearcherMode = SearcherMode.WorkersAskChief, auto_ack: bool = True
    ) -> Iterator[SearcherOperation]:
        """Raise ``ValueError``: there is no searcher length to hand out."""
        raise ValueError(_SEARCHER_MISSING)

    def acknowledge_out_of_ops(self) -> NoReturn:
        """Raise ``ValueError``: there is no searcher."""
        raise ValueError(_SEARCHER_MISSING)

    def get_configured_units(self) -> NoReturn:
        """Raise ``ValueError``: there is no searcher."""
        raise ValueError(_SEARCHER_MISSING)
