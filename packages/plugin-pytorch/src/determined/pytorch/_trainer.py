"""``det.pytorch.init()`` and ``Trainer``: run a PyTorchTrial with det's loop, on a cluster or off."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import warnings
from collections.abc import Iterator
from typing import Any

import torch
import torch.distributed

import determined as det
from determined import core
from determined.core.plugins import parse_max_length
from determined.pytorch._context import PyTorchTrialContext
from determined.pytorch._controller import PyTorchTrialController
from determined.pytorch._environment import TrialEnvironment, open_trial_context
from determined.pytorch._trial import PyTorchTrial
from determined.pytorch._units import Batch, Epoch, TrainUnit

logger = logging.getLogger("determined.pytorch")

CHECKPOINT_POLICIES = ("best", "all", "none")


def _torchrun_world_size() -> int:
    raw = os.environ.get("WORLD_SIZE", "")
    try:
        return int(raw) if raw and "RANK" in os.environ else 1
    except ValueError:
        return 1


def _init_process_group(num_gpus: int) -> bool:
    """Start torch.distributed for DDP when a launcher started several ranks; True if we did."""
    if _torchrun_world_size() < 2 or not torch.distributed.is_available():
        return False
    if torch.distributed.is_initialized():
        return False
    backend = "nccl" if num_gpus > 0 and torch.cuda.is_available() else "gloo"
    torch.distributed.init_process_group(backend=backend, init_method="env://")
    return True


@contextlib.contextmanager
def init(
    *,
    hparams: dict[str, Any] | None = None,
    exp_conf: dict[str, Any] | None = None,
    distributed: core.DistributedContext | None = None,
    aggregation_frequency: int = 1,
    enable_tensorboard_logging: bool = True,
    checkpoint_storage: str | dict[str, Any] | None = None,
) -> Iterator[PyTorchTrialContext]:
    """Create the PyTorchTrialContext for a Trainer; everything happens inside the ``with`` block.

    Args:
        hparams: the trial's hyperparameters (on a cluster, the trial's own when not given).
        exp_conf: the experiment config (on a cluster, the trial's).
        distributed: a DistributedContext; by default the launcher's environment decides
            (``python -m determined.launch.torch_distributed`` starts torch.distributed with gloo
            on CPU, nccl on GPU).
        aggregation_frequency: batches whose gradients are accumulated per optimizer step.
        enable_tensorboard_logging: write reported metrics to TensorBoard files.
        checkpoint_storage: det extension: where checkpoints go (a path, a storage URL or a
            ``checkpoint_storage`` dict); off-cluster the default is the user data dir.

    Differences from upstream: ``hparams`` default to the trial's on a cluster and ``distributed``
    is honoured there too; off-cluster the RNGs are seeded when ``exp_conf`` has
    ``reproducibility.experiment_seed`` (on a cluster always, with the trial seed).
    """
    env = TrialEnvironment.read(hparams, exp_conf)
    owns_process_group = _init_process_group(env.num_gpus)
    try:
        with open_trial_context(
            env,
            lambda core_context: PyTorchTrialContext(
                core_context=core_context,
                trial_seed=env.trial_seed,
                hparams=env.hparams,
                slots_per_trial=core_context.distributed.get_size(),
                num_gpus=env.num_gpus,
                exp_conf=env.exp_conf,
                aggregation_frequency=aggregation_frequency,
                steps_completed=env.steps_completed,
                managed_training=True,
                debug_enabled=env.debug_enabled,
                enable_tensorboard_logging=enable_tensorboard_logging,
            ),
            distributed=distributed,
            checkpoint_storage=checkpoint_storage,
        ) as context:
            yield context
    finally:
        if owns_process_group and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()


def _check_unit(name: str, value: Any, int_only: bool = False) -> TrainUnit:
    if not isinstance(value, (Batch, Epoch)):
        raise TypeError(
            f"{name}: must be det.pytorch.Batch(...) or det.pytorch.Epoch(...), not {value!r}"
        )
    if int_only and (isinstance(value.value, bool) or not isinstance(value.value, int)):
        raise TypeError(f"{name}: must be Batch(int) or Epoch(int), not {value!r}")
    return value


class Trainer:
    """Trains a :class:`PyTorchTrial` created with the context from :func:`init`."""

    # What this Trainer trains and which loop runs it (det.pytorch.deepspeed's Trainer overrides).
    _trial_class: type = PyTorchTrial
    _trial_class_name = "det.pytorch.PyTorchTrial"

    def __init__(self, trial: PyTorchTrial, context: PyTorchTrialContext) -> None:
        if not isinstance(trial, self._trial_class):
            raise TypeError(
                f"trial: expected a {self._trial_class_name}, not {type(trial).__name__}"
            )
        self._trial = trial
        self._context = context
        self._core = context._core
        self._info = det.get_cluster_info()
        self._local_training = self._info is None or self._info.task_type != "TRIAL"

    def configure_profiler(self, *args: Any, **kwargs: Any) -> None:
        """Deprecated upstream: use ``fit(profiling_enabled=True)``."""
        logger.error("configure_profiler() is replaced by fit(..., profiling_enabled=True)")

    def fit(
        self,
        checkpoint_period: TrainUnit | None = None,
        validation_period: TrainUnit | None = None,
        max_length: TrainUnit | None = None,
        reporting_period: TrainUnit = Batch(100),
        checkpoint_policy: str = "best",
        latest_checkpoint: str | None = None,
        step_zero_validation: bool = False,
        test_mode: bool = False,
        profiling_enabled: bool = False,
    ) -> None:
        """Train until ``max_length``, validating, checkpointing and reporting on the way.

        Args:
            checkpoint_period: checkpoint every period (``Batch``/``Epoch``; an int is a period,
                a container a schedule). Default: only at the end (and on preemption).
            validation_period: validate every period. Default: only at the end.
            max_length: how long to train, ``Batch(int)`` or ``Epoch(int)``. On a cluster it
                defaults to the experiment's ``searcher.max_length`` (deprecated upstream).
            reporting_period: report training metrics and progress every period.
            checkpoint_policy: after a validation, checkpoint ``"best"`` (when the searcher metric
                beats the experiment's best), ``"all"`` or ``"none"``.
            latest_checkpoint: the checkpoint to resume from
                (``det.get_cluster_info().latest_checkpoint`` on a cluster).
            step_zero_validation: validate once before training.
            test_mode: train one batch, validate one batch, checkpoint (also on a cluster).
            profiling_enabled: collect system metrics with core's profiler.
        """
        if checkpoint_policy not in CHECKPOINT_POLICIES:
            raise ValueError(
                f"checkpoint_policy: must be one of {', '.join(CHECKPOINT_POLICIES)}, "
                f"not {checkpoint_policy!r}"
            )
        checkpoint_period = _check_unit(
            "checkpoint_period", checkpoint_period or Batch(sys.maxsize)
        )
        validation_period = _check_unit(
            "validation_period", validation_period or Batch(sys.maxsize)
        )
        reporting_period = _check_unit("reporting_period", reporting_period)
        exp_conf = self._context._exp_conf or {}
        searcher = dict(exp_conf.get("searcher") or {})
        global_batch_size = self._context._global_batch_size
        if self._local_training:
            if max_length is None:
                raise ValueError(
                    "max_length: required off-cluster, e.g. fit(max_length=Batch(1000))"
                )
            steps_completed = 0
        else:
            assert self._info is not None
            if latest_checkpoint is None and self._info.latest_checkpoint is not None:
                logger.warning(
                    "fit(latest_checkpoint=None) although the trial has a checkpoint: pass "
                    "latest_checkpoint=det.get_cluster_info().latest_checkpoint to resume"
                )
            steps_completed = int(self._info.trial.steps_completed)
            if max_length is None:
                max_length = _max_length_from_searcher(searcher, global_batch_size)
                if max_length is None:
                    raise ValueError(
                        "max_length: required, e.g. fit(max_length=Batch(1000)) (the experiment "
                        "config has no searcher.max_length either)"
                    )
                warnings.warn(
                    "fit(): max_length comes from the deprecated searcher.max_length; pass "
                    "max_length= to fit() instead",
                    FutureWarning,
                    stacklevel=2,
                )
            _check_searcher_length(searcher, max_length)
        max_length = _check_unit("max_length", max_length, int_only=True)
        metric = searcher.get("metric")
        smaller_is_better = bool(searcher.get("smaller_is_better", True))
        if checkpoint_policy == "best" and not metric:
            logger.warning(
                "checkpoint_policy='best' needs a searcher metric (exp_conf searcher.metric); "
                "checkpointing after every validation instead"
            )
            checkpoint_policy = "all"
        if profiling_enabled and self._local_training:
            logger.info("profiling_enabled: system metrics are logged locally")
        controller = self._make_controller(
            trial_inst=self._trial,
            context=self._context,
            checkpoint_period=checkpoint_period,
            validation_period=validation_period,
            reporting_period=reporting_period,
            max_length=max_length,
            smaller_is_better=smaller_is_better,
            searcher_metric_name=metric,
            steps_completed=steps_completed,
            latest_checkpoint=latest_checkpoint,
            local_training=self._local_training,
            test_mode=test_mode,
            checkpoint_policy=checkpoint_policy,
            step_zero_validation=step_zero_validation,
            profiling_enabled=profiling_enabled,
            global_batch_size=global_batch_size,
        )
        controller.run()

    def _make_controller(self, **kwargs: Any) -> PyTorchTrialController:
        return PyTorchTrialController(**kwargs)


def _max_length_from_searcher(
    searcher: dict[str, Any], global_batch_size: int | None
) -> TrainUnit | None:
    """Upstream's mapping of the searcher's length (``max_length`` with units, or ASHA's
    ``max_time``/``time_metric``) to a Trainer length."""
    length, unit = parse_max_length(searcher)
    if not length:
        return None
    return TrainUnit._from_searcher_unit(length, unit or core.Unit.BATCHES, global_batch_size)


def _check_searcher_length(searcher: dict[str, Any], max_length: TrainUnit) -> None:
    time_metric, max_time = searcher.get("time_metric"), searcher.get("max_time")
    if time_metric is None or max_time is None:
        return
    expected = {"batches": Batch, "epochs": Epoch}.get(str(time_metric))
    if expected is None:
        logger.warning(
            "searcher.time_metric %r is neither 'batches' nor 'epochs'; training for %r",
            time_metric,
            max_length,
        )
    elif not isinstance(max_length, expected) or max_length.value != max_time:
        logger.warning(
            "fit(max_length=%r) does not match searcher.max_time=%s %s; the search may behave "
            "unexpectedly",
            max_length,
            max_time,
            time_metric,
        )
