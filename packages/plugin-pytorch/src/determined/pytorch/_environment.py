"""What a trial process knows before it builds its context, and the ``init()`` steps around it.

``TrialEnvironment.read()`` takes the trial's seed, hyperparameters, experiment config, resume step,
GPUs and debug flag from ``det.get_cluster_info()`` on a cluster, and from the caller's arguments
off it. ``open_trial_context()`` is the common body of ``det.pytorch.init()`` and of a framework
plugin's ``init()``: seed the RNGs, start core with the Trainer's modes, build the context, close its
TensorBoard writer at the end.
"""

from __future__ import annotations

import contextlib
import dataclasses
import random
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import torch

import determined as det
from determined import core

if TYPE_CHECKING:
    from determined import ClusterInfo
    from determined.pytorch._context import PyTorchTrialContext

ContextT = TypeVar("ContextT", bound="PyTorchTrialContext")


def set_random_seeds(seed: int) -> None:
    """Seed Python's, NumPy's and torch's RNGs with ``seed``."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.random.manual_seed(seed)


@dataclasses.dataclass(frozen=True)
class TrialEnvironment:
    """The trial as its process finds it: on a cluster from ``ClusterInfo``, off it from the
    arguments of ``init()``."""

    cluster_info: ClusterInfo | None
    """``det.get_cluster_info()`` (``None`` off-cluster)."""
    local: bool
    """True unless this process is an experiment trial on a cluster."""
    trial_seed: int | None
    """The trial's seed; off-cluster ``exp_conf``'s ``reproducibility.experiment_seed``, if any."""
    hparams: dict[str, Any] | None
    exp_conf: dict[str, Any] | None
    steps_completed: int
    """Batches trained before this run (where a resumed trial starts)."""
    num_gpus: int
    debug_enabled: bool

    @classmethod
    def read(
        cls, hparams: dict[str, Any] | None = None, exp_conf: dict[str, Any] | None = None
    ) -> TrialEnvironment:
        """The environment of this process; ``hparams`` win over the trial's on a cluster, where
        the experiment config is always the trial's."""
        info = det.get_cluster_info()
        if info is not None and info.task_type == "TRIAL":
            return cls(
                cluster_info=info,
                local=False,
                trial_seed=int(info.trial.trial_seed),
                hparams=info.trial.hparams if hparams is None else hparams,
                exp_conf=info.trial.config,
                steps_completed=int(info.trial.steps_completed),
                num_gpus=len(info.gpu_uuids),
                debug_enabled=bool(info.trial.debug),
            )
        seed = ((exp_conf or {}).get("reproducibility") or {}).get("experiment_seed")
        return cls(
            cluster_info=info,
            local=True,
            trial_seed=int(seed) if seed is not None else None,
            hparams=hparams,
            exp_conf=exp_conf,
            steps_completed=0,
            num_gpus=torch.cuda.device_count(),
            debug_enabled=False,
        )


@contextlib.contextmanager
def open_trial_context(
    env: TrialEnvironment,
    make_context: Callable[[core.Context], ContextT],
    *,
    distributed: core.DistributedContext | None,
    checkpoint_storage: str | dict[str, Any] | None,
) -> Iterator[ContextT]:
    """Seed the RNGs (when the environment has a seed), start ``core.init()`` with the modes the
    Trainer's loop expects (workers ask the chief about preemption, TensorBoard files uploaded by
    the loop), build the trial context with ``make_context(core_context)`` and, when the block
    ends, close its TensorBoard writer."""
    if env.trial_seed is not None:
        set_random_seeds(env.trial_seed)
    with core.init(
        distributed=distributed,
        checkpoint_storage=checkpoint_storage,
        preempt_mode=core.PreemptMode.WorkersAskChief,
        tensorboard_mode=core.TensorboardMode.MANUAL,
    ) as core_context:
        context = make_context(core_context)
        try:
            yield context
        finally:
            if context._tbd_writer is not None:
                context._tbd_writer.close()
