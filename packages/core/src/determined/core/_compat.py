"""Upstream's ``Dummy*`` names, kept so code written for Determined runs unchanged.

Upstream had a "Dummy" twin of every context for off-cluster use. det has one implementation of each,
parameterised by a backend, so these are factories returning the real classes wired to the local
backend — not subclasses that could drift apart.
"""

from __future__ import annotations

import pathlib
from typing import TYPE_CHECKING

from determined.core._checkpoint import CheckpointContext
from determined.core._distributed import DistributedContext
from determined.core._experimental import ExperimentalCoreContext
from determined.core._local_backend import LocalBackend
from determined.core._preempt import PreemptContext, PreemptMode
from determined.core._profiler import ProfilerContext
from determined.core._searcher import SearcherContext, SearcherOperation
from determined.core._tensorboard import TensorboardMode, default_tensorboard_path
from determined.core._train import TrainContext

if TYPE_CHECKING:
    from determined.storage import StorageManager


def DummyDistributedContext() -> DistributedContext:
    """A single-process DistributedContext (rank 0 of 1)."""
    return DistributedContext(
        rank=0, size=1, local_rank=0, local_size=1, cross_rank=0, cross_size=1
    )


def DummyCheckpointContext(
    dist: DistributedContext, storage_manager: StorageManager
) -> CheckpointContext:
    """A CheckpointContext that stores checkpoints but reports them to no master."""
    return CheckpointContext(dist, storage_manager, LocalBackend(storage_manager), task_id="local")


def DummyTrainContext(tensorboard_path: pathlib.Path | None = None) -> TrainContext:
    """A TrainContext whose reports are logged."""
    return TrainContext(
        LocalBackend(),
        trial_id=0,
        run_id=0,
        exp_id=0,
        tensorboard_mode=TensorboardMode.MANUAL,
        tensorboard_path=tensorboard_path or default_tensorboard_path(None, 0),
    )


def DummySearcherContext(dist: DistributedContext, length: int = 1) -> SearcherContext:
    """A SearcherContext yielding one operation of ``length``."""
    return SearcherContext(LocalBackend(), dist, 0, max_length=length)


def DummySearcherOperation(length: int, is_chief: bool) -> SearcherOperation:
    """A SearcherOperation of ``length`` not tied to any searcher."""
    return SearcherOperation(
        DummySearcherContext(DummyDistributedContext(), length), length, is_chief
    )


def DummyPreemptContext(
    dist: DistributedContext, preempt_mode: PreemptMode = PreemptMode.WorkersAskChief
) -> PreemptContext:
    """A PreemptContext with no signal source (never asks to stop)."""
    return PreemptContext(dist, [], LocalBackend(), None, preempt_mode)


def DummyProfilerContext() -> ProfilerContext:
    """A ProfilerContext whose samples are discarded."""
    return ProfilerContext(lambda group, metrics: None, "local", local_rank=0)


def DummyExperimentalCoreContext() -> ExperimentalCoreContext:
    """An ExperimentalCoreContext that records nothing."""
    return ExperimentalCoreContext(LocalBackend(), None)
