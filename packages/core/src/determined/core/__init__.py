"""The Core API: ``det.core.init()`` and the contexts it returns, plus the plugin markers.

Plugins implement the specs of :mod:`determined.core.hookspecs` with :data:`hookimpl`;
:mod:`determined.core.plugins` holds everything else a plugin or another det distribution uses.
"""

from determined.core import plugins
from determined.core._checkpoint import (
    CheckpointContext,
    DownloadMode,
    merge_metadata,
    merge_resources,
)
from determined.core._compat import (
    DummyCheckpointContext,
    DummyDistributedContext,
    DummyExperimentalCoreContext,
    DummyPreemptContext,
    DummyProfilerContext,
    DummySearcherContext,
    DummySearcherOperation,
    DummyTrainContext,
    SearcherContextMissing,
)
from determined.core._context import Context, init
from determined.core._context import (
    _dummy_init as _dummy_init,  # upstream private name, used by Trainers
)
from determined.core._distributed import DistributedContext
from determined.core._experimental import ExperimentalCoreContext
from determined.core._markers import hookimpl, hookspec
from determined.core._preempt import PreemptContext, PreemptMode
from determined.core._preempt_sources import PreemptionSource
from determined.core._profiler import ProfilerContext
from determined.core._searcher import SearcherContext, SearcherMode, SearcherOperation, Unit
from determined.core._tensorboard import TensorboardMode
from determined.core._train import EarlyExitReason, TrainContext
from determined.core._trial_runner import TrialRunner

__all__ = [
    "CheckpointContext",
    "Context",
    "DistributedContext",
    "DownloadMode",
    "DummyCheckpointContext",
    "DummyDistributedContext",
    "DummyExperimentalCoreContext",
    "DummyPreemptContext",
    "DummyProfilerContext",
    "DummySearcherContext",
    "DummySearcherOperation",
    "DummyTrainContext",
    "EarlyExitReason",
    "ExperimentalCoreContext",
    "PreemptContext",
    "PreemptMode",
    "PreemptionSource",
    "ProfilerContext",
    "SearcherContext",
    "SearcherContextMissing",
    "SearcherMode",
    "SearcherOperation",
    "TensorboardMode",
    "TrainContext",
    "TrialRunner",
    "Unit",
    "hookimpl",
    "hookspec",
    "init",
    "merge_metadata",
    "merge_resources",
    "plugins",
]
