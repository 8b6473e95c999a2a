"""The contract between ``python -m determined.launch.trial`` and the framework plugins.

A legacy entrypoint (``entrypoint: model_def:MyTrial``) names a Trial class. The launcher imports it
and asks the ``det_trial_runner`` hook which plugin can train it; that plugin returns a
:class:`TrialRunner`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from determined import ClusterInfo


@runtime_checkable
class TrialRunner(Protocol):
    """Trains one legacy Trial class inside a trial process.

    Attributes:
        launcher: the module of the distributed launcher that multi-slot trials of this kind run
            under (``"determined.launch.torch_distributed"`` for PyTorchTrial), or ``None`` when the
            runner starts its own workers. ``determined.launch.trial`` re-executes itself under it
            when the trial has more than one slot and no launcher is in place yet.
    """

    launcher: str | None

    def run(self, trial_class: type, cluster_info: ClusterInfo | None) -> None:
        """Train ``trial_class`` to the end of the experiment's searcher length in this process.

        Reads hyperparameters, the experiment config and the latest checkpoint from
        ``cluster_info`` (``None`` off-cluster), reports metrics and checkpoints through the Core
        API, and returns normally when training stopped for any expected reason (completed,
        paused, preempted). Errors propagate so the process exits non-zero.
        """
        ...
