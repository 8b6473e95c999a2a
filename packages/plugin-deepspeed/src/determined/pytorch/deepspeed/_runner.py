"""det-plugin-deepspeed's answer to ``det_trial_runner``: legacy ``entrypoint: model_def:MyTrial``.

Registered by the entry point ``deepspeed`` of the group ``determined``. Importing this module loads
neither torch nor DeepSpeed: a class can only be a DeepSpeedTrial if the trial's module already
imported ``det.pytorch.deepspeed``. Multi-slot trials run under ``determined.launch.deepspeed``.
"""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING, Any

from determined.core import hookimpl

if TYPE_CHECKING:
    from determined import ClusterInfo

logger = logging.getLogger("determined.pytorch.deepspeed")


class DeepSpeedTrialRunner:
    """Runs a DeepSpeedTrial class the way upstream's harness did: the experiment config's legacy
    fields (``searcher.max_length``, ``min_validation_period``, ``min_checkpoint_period``,
    ``scheduling_unit``, ``checkpoint_policy``, ``perform_initial_validation``) become ``fit()``
    arguments."""

    launcher: str | None = "determined.launch.deepspeed"

    def run(self, trial_class: type, cluster_info: ClusterInfo | None) -> None:
        from determined.pytorch import deepspeed as det_ds
        from determined.pytorch.extension import fit_kwargs

        if cluster_info is None or cluster_info.task_type != "TRIAL":
            raise ValueError(
                "a legacy DeepSpeedTrial entrypoint runs as an experiment trial; off-cluster use "
                "det.pytorch.deepspeed.init() and Trainer(trial, context).fit(max_length=...)"
            )
        config: dict[str, Any] = dict(cluster_info.trial.config or {})
        hparams = dict(cluster_info.trial.hparams or {})
        with det_ds.init(hparams=hparams, exp_conf=config) as context:
            if context.distributed.rank != 0:
                logging.getLogger().setLevel(logging.WARNING)
            trial = trial_class(context)
            # Lengths in records count samples of the engine's train_batch_size.
            fit = fit_kwargs(config, cluster_info, context._global_batch_size, "DeepSpeedTrial")
            det_ds.Trainer(trial, context).fit(**fit)


@hookimpl
def det_trial_runner(trial_class: type) -> DeepSpeedTrialRunner | None:
    """A runner for DeepSpeedTrial subclasses; ``None`` for anything else."""
    trial_module = sys.modules.get("determined.pytorch.deepspeed._trial")
    if trial_module is None:
        return None
    if isinstance(trial_class, type) and issubclass(trial_class, trial_module.DeepSpeedTrial):
        return DeepSpeedTrialRunner()
    return None
