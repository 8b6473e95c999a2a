"""det-plugin-pytorch's answer to ``det_trial_runner``: legacy ``entrypoint: model_def:MyTrial``.

Registered by the entry point ``pytorch`` of the group ``determined``. Importing this module loads no
torch: a class can only be a PyTorchTrial if the trial's module already imported det.pytorch.
"""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING, Any

from determined.core import hookimpl

if TYPE_CHECKING:
    from determined import ClusterInfo
    from determined.pytorch._units import TrainUnit

logger = logging.getLogger("determined.pytorch")


def _period(config: dict[str, Any], key: str, global_batch_size: int | None) -> TrainUnit | None:
    from determined.pytorch._units import TrainUnit

    value = config.get(key)
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        value = {"batches": value}
    if not isinstance(value, dict) or len(value) != 1:
        raise ValueError(f"{key}: expected one unit like {{'batches': 100}}, got {value!r}")
    ((unit, count),) = value.items()
    if unit not in ("batches", "records", "epochs"):
        raise ValueError(f"{key}: unit must be batches, records or epochs, not {unit!r}")
    if not count or int(count) < 1:
        return None
    return TrainUnit._from_values(**{unit: int(count)}, global_batch_size=global_batch_size)


def fit_kwargs(
    config: dict[str, Any],
    cluster_info: ClusterInfo,
    global_batch_size: int | None,
    trial_kind: str,
) -> dict[str, Any]:
    """The ``Trainer.fit()`` arguments upstream's harness derived from a legacy experiment config:
    ``searcher.max_length`` (or ASHA's ``max_time``), ``min_checkpoint_period``,
    ``min_validation_period``, ``scheduling_unit``, ``checkpoint_policy``,
    ``perform_initial_validation`` and ``profiling.enabled``. Lengths in records count samples of
    ``global_batch_size``; ``trial_kind`` names the trial class kind in errors."""
    from determined import pytorch
    from determined.pytorch._trainer import _max_length_from_searcher

    searcher = dict(config.get("searcher") or {})
    max_length = _max_length_from_searcher(searcher, global_batch_size)
    if max_length is None:
        raise ValueError(
            f"searcher.max_length: a legacy {trial_kind} entrypoint needs a training length "
            "(searcher.max_length, or max_time with time_metric for ASHA searchers)"
        )
    reporting = config.get("scheduling_unit") or 100
    return {
        "max_length": max_length,
        "checkpoint_period": _period(config, "min_checkpoint_period", global_batch_size),
        "validation_period": _period(config, "min_validation_period", global_batch_size),
        "reporting_period": pytorch.Batch(int(reporting)),
        "checkpoint_policy": str(config.get("checkpoint_policy") or "best"),
        "latest_checkpoint": cluster_info.latest_checkpoint,
        "step_zero_validation": bool(config.get("perform_initial_validation", False)),
        "profiling_enabled": bool((config.get("profiling") or {}).get("enabled", False)),
    }


class PyTorchTrialRunner:
    """Runs a PyTorchTrial class the way upstream's harness did: the experiment config's legacy
    fields become ``init()``/``fit()`` arguments."""

    launcher: str | None = "determined.launch.torch_distributed"

    def run(self, trial_class: type, cluster_info: ClusterInfo | None) -> None:
        from determined import pytorch

        if cluster_info is None or cluster_info.task_type != "TRIAL":
            raise ValueError(
                "a legacy PyTorchTrial entrypoint runs as an experiment trial; off-cluster use "
                "det.pytorch.init() and det.pytorch.Trainer(trial, context).fit(max_length=...)"
            )
        config = dict(cluster_info.trial.config or {})
        hparams = dict(cluster_info.trial.hparams or {})
        optimizations = dict(config.get("optimizations") or {})
        global_batch_size = hparams.get("global_batch_size")
        if not isinstance(global_batch_size, int) or isinstance(global_batch_size, bool):
            global_batch_size = None
        fit = fit_kwargs(config, cluster_info, global_batch_size, "PyTorchTrial")
        with pytorch.init(
            hparams=hparams,
            exp_conf=config,
            aggregation_frequency=int(optimizations.get("aggregation_frequency") or 1),
        ) as context:
            if context.distributed.rank != 0:
                logging.getLogger().setLevel(logging.WARNING)
            context._set_default_average_aggregated_gradients(
                bool(optimizations.get("average_aggregated_gradients", True))
            )
            context._set_default_gradient_compression(
                bool(optimizations.get("gradient_compression", False))
            )
            context._set_is_pre_trainer()
            trial = trial_class(context)
            pytorch.Trainer(trial, context).fit(**fit)


@hookimpl
def det_trial_runner(trial_class: type) -> PyTorchTrialRunner | None:
    """A runner for PyTorchTrial subclasses; ``None`` for anything else."""
    trial_module = sys.modules.get("determined.pytorch._trial")
    if trial_module is None:
        return None
    if isinstance(trial_class, type) and issubclass(trial_class, trial_module.PyTorchTrial):
        return PyTorchTrialRunner()
    return None
