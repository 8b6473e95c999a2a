"""``det.pytorch.deepspeed.init()`` and ``Trainer``: run a DeepSpeedTrial, on a cluster or off it.

``init()`` makes a plain ``python train.py`` work: in a single process with no launcher variables it
fills in the five that DeepSpeed needs (``RANK WORLD_SIZE LOCAL_RANK MASTER_ADDR MASTER_PORT``,
upstream left that to the user), starts torch.distributed through ``deepspeed.init_distributed``
(gloo on CPU, nccl on GPUs) and builds the DistributedContext from the launcher's variables
(``python -m determined.launch.deepspeed``, the ``deepspeed`` CLI or torchrun).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator
from typing import Any

import torch
import torch.distributed

from determined import core
from determined.core.plugins import free_ports
from determined.pytorch import Trainer as _PyTorchTrainer
from determined.pytorch import extension
from determined.pytorch.deepspeed._context import DeepSpeedTrialContext
from determined.pytorch.deepspeed._controller import DeepSpeedTrialController
from determined.pytorch.deepspeed._trial import DeepSpeedTrial

logger = logging.getLogger("determined.pytorch.deepspeed")

MANUAL_INIT_ENV = "DET_MANUAL_INIT_DISTRIBUTED"
BUILD_SHM_OP_ENV = "DET_DEEPSPEED_BUILD_SHM_OP"
LAUNCHER_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


@contextlib.contextmanager
def _single_process_env() -> Iterator[None]:
    """The launcher variables of a one-process job while the block runs, when no launcher set
    them (DeepSpeed otherwise falls back to MPI discovery and fails without mpi4py)."""
    if "RANK" in os.environ or "WORLD_SIZE" in os.environ:
        yield
        return
    defaults = {
        "RANK": "0",
        "WORLD_SIZE": "1",
        "LOCAL_RANK": "0",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(free_ports(1)[0]),
    }
    added = {k: v for k, v in defaults.items() if k not in os.environ}
    os.environ.update(added)
    try:
        yield
    finally:
        for name in added:
            os.environ.pop(name, None)


def _skip_cpu_shm_op() -> None:
    """Keep DeepSpeed from JIT-compiling its shared-memory allreduce op on CPU-only machines.

    The op only speeds up ``inference_all_reduce`` (unused by training), but building it takes
    40-90 s and a C++ compiler on the first ``init_distributed``. ``DET_DEEPSPEED_BUILD_SHM_OP=1``
    builds it as DeepSpeed normally would.
    """
    if torch.cuda.is_available() or os.environ.get(BUILD_SHM_OP_ENV, "") not in ("", "0"):
        return
    comm_torch = sys.modules.get("deepspeed.comm.torch")
    if comm_torch is not None and hasattr(comm_torch, "build_shm_op"):
        comm_torch.build_shm_op = lambda: None


def _init_distributed() -> None:
    """Start torch.distributed the way DeepSpeed does, unless it runs already or the user asked to
    do it (``DET_MANUAL_INIT_DISTRIBUTED``)."""
    if os.environ.get(MANUAL_INIT_ENV):
        return
    import deepspeed
    import deepspeed.comm.torch

    _skip_cpu_shm_op()
    deepspeed.init_distributed(auto_mpi_discovery=False)


def _launcher_world_size() -> int:
    try:
        return int(os.environ.get("WORLD_SIZE", "1") or 1)
    except ValueError:
        raise ValueError(
            f"environment variable WORLD_SIZE must be an integer, not {os.environ['WORLD_SIZE']!r}"
        ) from None


@contextlib.contextmanager
def init(
    *,
    hparams: dict[str, Any] | None = None,
    exp_conf: dict[str, Any] | None = None,
    distributed: core.DistributedContext | None = None,
    enable_tensorboard_logging: bool = True,
    checkpoint_storage: str | dict[str, Any] | None = None,
) -> Iterator[DeepSpeedTrialContext]:
    """Create the DeepSpeedTrialContext for a Trainer; everything happens inside the ``with`` block.

    Args:
        hparams: the trial's hyperparameters (on a cluster, the trial's own when not given).
        exp_conf: the experiment config (on a cluster, the trial's).
        distributed: a DistributedContext; by default one is built from the launcher's
            variables (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_SIZE``, ...).
        enable_tensorboard_logging: write reported metrics to TensorBoard files.
        checkpoint_storage: det extension: where checkpoints go (a path, a storage URL or a
            ``checkpoint_storage`` dict); off-cluster the default is the user data dir.

    Differences from upstream: runs without GPUs (gloo on CPU) and without launcher variables in
    a single process; ``hparams`` default to the trial's on a cluster; off-cluster the RNGs are
    seeded when ``exp_conf`` has ``reproducibility.experiment_seed`` (on a cluster always).
    """
    env = extension.TrialEnvironment.read(hparams, exp_conf)
    info = env.cluster_info
    with _single_process_env():
        _init_distributed()
        if distributed is None and _launcher_world_size() > 1:
            distributed = core.DistributedContext.from_deepspeed(
                chief_ip=(info.container_addrs[0] if info and info.container_addrs else None)
            )
        with extension.open_trial_context(
            env,
            lambda core_context: DeepSpeedTrialContext(
                core_context=core_context,
                trial_seed=env.trial_seed,
                hparams=env.hparams,
                slots_per_trial=core_context.distributed.get_size(),
                num_gpus=env.num_gpus,
                exp_conf=env.exp_conf,
                steps_completed=env.steps_completed,
                enable_tensorboard_logging=enable_tensorboard_logging,
                debug_enabled=env.debug_enabled,
            ),
            distributed=distributed,
            checkpoint_storage=checkpoint_storage,
        ) as context:
            yield context


class Trainer(_PyTorchTrainer):
    """Trains a :class:`DeepSpeedTrial` created with the context from :func:`init`.

    ``fit()`` takes the same arguments as ``det.pytorch.Trainer.fit`` (periods in
    ``det.pytorch.Batch``/``Epoch``; a batch is one optimizer step of ``train_batch_size`` samples).
    """

    _trial_class = DeepSpeedTrial
    _trial_class_name = "det.pytorch.deepspeed.DeepSpeedTrial"

    def __init__(self, trial: DeepSpeedTrial, context: DeepSpeedTrialContext) -> None:
        if not isinstance(context, DeepSpeedTrialContext):
            raise TypeError(
                "context: expected the DeepSpeedTrialContext of det.pytorch.deepspeed.init(), not "
                f"{type(context).__name__}"
            )
        super().__init__(trial, context)  # type: ignore[arg-type]

    def _make_controller(self, **kwargs: Any) -> DeepSpeedTrialController:
        return DeepSpeedTrialController(**kwargs)
