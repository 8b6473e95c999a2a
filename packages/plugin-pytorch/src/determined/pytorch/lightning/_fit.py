"""``fit()``: run a LightningModule as a det trial (or as a plain local run) in one call."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Mapping
from typing import Any

import pytorch_lightning as pl

import determined as det
from determined.core import Unit
from determined.core.plugins import parse_max_length
from determined.pytorch.lightning._callback import DetCallback
from determined.pytorch.lightning._logger import DetLogger

logger = logging.getLogger("determined.pytorch.lightning")

ModuleOrFactory = pl.LightningModule | Callable[..., pl.LightningModule]
DataModuleOrFactory = pl.LightningDataModule | Callable[..., pl.LightningDataModule]


def trial_hparams(defaults: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The hyperparameters of this run: ``defaults`` updated with the trial's (on-cluster).

    Off-cluster there is no trial, so it is ``defaults`` alone.
    """
    hparams = dict(defaults or {})
    info = det.get_cluster_info()
    if info is not None and info.task_type == "TRIAL":
        hparams.update(info.trial.hparams)
    return hparams


def fit(
    module: ModuleOrFactory,
    datamodule: DataModuleOrFactory | None = None,
    *,
    train_dataloaders: Any = None,
    val_dataloaders: Any = None,
    trainer_kwargs: Mapping[str, Any] | None = None,
    hparams: Mapping[str, Any] | None = None,
    seed: int | None = None,
    checkpoint_policy: str = "best",
    latest_checkpoint: str | None = None,
    checkpoint_storage: str | dict[str, Any] | None = None,
    core_context: det.core.Context | None = None,
) -> pl.Trainer | None:
    """Train ``module`` with a ``pl.Trainer`` wired to det: metrics, checkpoints, preemption, resume.

    The same call works as an experiment entrypoint on a master and as a plain local script.
    On-cluster, the trial's hyperparameters (over ``hparams``) build the module, the trial seed seeds
    every generator, the training length defaults to the experiment's searcher length, the run resumes
    from the trial's latest checkpoint, and a pause, or a searcher that stops the trial, ends
    ``fit`` cleanly after a checkpoint.

    Args:
        module: a LightningModule, or a callable that builds one from the hyperparameters passed
            as keyword arguments (a LightningModule class works as it is). Building it inside
            ``fit`` lets the trial seed apply to its initial weights.
        datamodule: a LightningDataModule, or a callable that builds one the same way.
        train_dataloaders: passed to ``trainer.fit`` (instead of a datamodule).
        val_dataloaders: passed to ``trainer.fit``.
        trainer_kwargs: arguments for ``pl.Trainer``. Loggers and callbacks given here are kept;
            :class:`DetLogger` and :class:`DetCallback` are added. On-cluster, a searcher that
            sets a training length (ASHA's ``time_metric``/``max_time``, or the legacy
            ``max_length``, in batches or epochs) sets ``max_steps``/``max_epochs``: it decides
            how far each trial trains. The progress bar is off on-cluster unless asked for.
            Under ``python -m determined.launch.torch_distributed`` (several processes),
            ``strategy`` defaults to ``"ddp"`` and ``devices``/``num_nodes`` to the launcher's
            processes per node and nodes.
        hparams: default hyperparameters (all of them off-cluster; on-cluster the trial's win).
        seed: seed for ``pl.seed_everything`` (default: the trial seed on-cluster, none off-cluster).
        checkpoint_policy: see :class:`DetCallback`.
        latest_checkpoint: the det checkpoint to resume from (default: the trial's latest).
        checkpoint_storage: for ``det.core.init()`` when ``fit`` creates the core context.
        core_context: an existing Core API context (``fit`` creates and closes one otherwise).

    Returns:
        The Trainer after ``fit`` (``trainer.should_stop`` is true when it stopped early for a
        preemption or the searcher), or ``None`` when building the module raised ``det.InvalidHP``
        and ``fit`` owned the core context (the trial then ends as invalid, without an error).
    """
    info = det.get_cluster_info()
    on_cluster = info is not None and info.task_type == "TRIAL"
    kwargs = _trainer_kwargs(trainer_kwargs, info if on_cluster else None)
    params = trial_hparams(hparams)
    if seed is None and on_cluster:
        assert info is not None
        seed = info.trial.trial_seed
    with contextlib.ExitStack() as stack:
        if core_context is None:
            core_context = stack.enter_context(det.core.init(checkpoint_storage=checkpoint_storage))
        if seed is not None:
            pl.seed_everything(seed, workers=True, verbose=False)
        lightning_module = _build(module, pl.LightningModule, params, "module")
        data = None
        if datamodule is not None:
            data = _build(datamodule, pl.LightningDataModule, params, "datamodule")
        det_callback = DetCallback(
            core_context,
            checkpoint_policy=checkpoint_policy,
            latest_checkpoint=latest_checkpoint,
        )
        dist = core_context.distributed
        if dist.size > 1:  # launched by det's torch_distributed launcher (torchrun)
            kwargs.setdefault("strategy", "ddp")
            kwargs.setdefault("devices", dist.local_size)
            kwargs.setdefault("num_nodes", dist.cross_size)
        kwargs["logger"] = [*kwargs.get("logger", []), DetLogger(core_context)]
        kwargs["callbacks"] = [*kwargs.get("callbacks", []), det_callback]
        trainer = pl.Trainer(**kwargs)
        trainer.fit(
            lightning_module,
            train_dataloaders=train_dataloaders,
            val_dataloaders=val_dataloaders,
            datamodule=data,
            ckpt_path=det_callback.resume_ckpt_path(),
            weights_only=True,
        )
        return trainer
    return None  # det.InvalidHP: the core context reported it and ended the block


def _build(what: Any, kind: type, params: dict[str, Any], name: str) -> Any:
    if isinstance(what, kind):
        return what
    if not callable(what):
        raise TypeError(
            f"{name}: must be a {kind.__name__} or a callable that builds one, "
            f"got {type(what).__name__}"
        )
    built = what(**params)
    if not isinstance(built, kind):
        raise TypeError(
            f"{name}: the callable returned {type(built).__name__}, not a {kind.__name__}"
        )
    return built


def _trainer_kwargs(
    given: Mapping[str, Any] | None, info: det.ClusterInfo | None
) -> dict[str, Any]:
    """``given`` with the loggers and callbacks as lists, and on-cluster defaults filled in."""
    if given is not None and not isinstance(given, Mapping):
        raise TypeError(f"trainer_kwargs: must be a dict, got {type(given).__name__}")
    kwargs = dict(given or {})
    if kwargs.get("enable_checkpointing") is False:
        raise ValueError(
            "trainer_kwargs.enable_checkpointing: DetCallback is the Trainer's checkpointing "
            "callback, so it cannot be False (set checkpoint_policy='none' for fewer checkpoints)"
        )
    user_logger = kwargs.get("logger")
    if user_logger is None or isinstance(user_logger, bool):
        kwargs["logger"] = []  # Lightning's default TensorBoard/CSV logger is replaced by det's
    elif not isinstance(user_logger, list | tuple):
        kwargs["logger"] = [user_logger]
    else:
        kwargs["logger"] = list(user_logger)
    callbacks = kwargs.get("callbacks")
    if callbacks is None:
        kwargs["callbacks"] = []
    elif not isinstance(callbacks, list | tuple):
        kwargs["callbacks"] = [callbacks]
    else:
        kwargs["callbacks"] = list(callbacks)
    if info is None:
        return kwargs
    kwargs.setdefault("enable_progress_bar", False)  # trial logs are line-oriented
    length, units = parse_max_length(dict(info.trial.config.get("searcher") or {}))
    if length is None:
        return kwargs
    if units == Unit.EPOCHS:
        searcher_length = {"max_epochs": length, "max_steps": -1}
    elif units in (None, Unit.BATCHES):
        searcher_length = {"max_steps": length, "max_epochs": -1}
    else:
        raise ValueError(
            "searcher: lengths in records are not supported with Lightning; use time_metric "
            "batches or epochs"
        )
    given = {k: kwargs[k] for k in ("max_steps", "max_epochs") if k in kwargs}
    if given and any(given.get(k, v) != v for k, v in searcher_length.items()):
        logger.info("training length from the searcher %s instead of %s", searcher_length, given)
    kwargs.update(searcher_length)
    return kwargs
