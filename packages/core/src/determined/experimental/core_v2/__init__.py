"""``determined.experimental.core_v2``: unmanaged runs, upstream Determined 0.38's names.

A script started anywhere (a laptop, Slurm, Ray, a notebook) reports to a det master without being
launched by it::

    from determined.experimental import core_v2

    core_v2.init(config=core_v2.Config(name="my-run", external_experiment_id="run-1",
                                       external_trial_id="run-1"))
    if core_v2.info.latest_checkpoint is not None:
        ...  # resume: core_v2.checkpoint.restore_path(core_v2.info.latest_checkpoint)
    core_v2.train.report_training_metrics(steps_completed=1, metrics={"loss": 0.5})
    core_v2.close()

The experiment is created on the master of ``$DET_MASTER`` marked ``unmanaged``: the master never
schedules it, it appears in ``det e list``, the SDK and the web UI like any other, and a run with the
same external ids finds the same experiment and trial and its latest checkpoint. Launched by the
master (on-cluster), the same script gets the trial the master started (``det.core.init()``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from determined import core
from determined.core import DistributedContext, PreemptMode, TensorboardMode
from determined.experimental.core_v2._core_v2 import (
    Config,
    DefaultConfig,
    UnmanagedConfig,
    close,
    init,
    init_context,
    url_reverse_webui_exp_view,
)

if TYPE_CHECKING:
    import determined

# The singletons init() sets (None before init(); close() resets `train`).
train: core.TrainContext | None = None
checkpoint: core.CheckpointContext | None = None
distributed: core.DistributedContext | None = None
preempt: core.PreemptContext | None = None
searcher: core.SearcherContext | None = None
info: determined.ClusterInfo | None = None

__all__ = [
    "Config",
    "DefaultConfig",
    "DistributedContext",
    "PreemptMode",
    "TensorboardMode",
    "UnmanagedConfig",
    "checkpoint",
    "close",
    "core",
    "distributed",
    "info",
    "init",
    "init_context",
    "preempt",
    "searcher",
    "train",
    "url_reverse_webui_exp_view",
]
