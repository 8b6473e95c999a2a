"""The checkpoint steps of the trial controller: what a checkpoint holds, how it is written and read.

``CheckpointSteps`` is a base of :class:`~determined.pytorch.extension.PyTorchTrialController`: it
works on the controller's state (``trial``, ``context``, ``state``, ``callbacks``, ``train_seed``,
``batch_metrics``). The PyTorch loop writes one ``state_dict.pth`` from the chief; a framework plugin
that writes from every rank (det.pytorch.deepspeed) overrides :meth:`CheckpointSteps.save_checkpoint`,
:meth:`read_checkpoint` and :meth:`apply_checkpoint` and builds them from the smaller steps here
(``loop_state_dict``, ``write_trial_files``, ``restore_loop_position``, ...), so the checkpoint
format stays one.
"""

from __future__ import annotations

import contextlib
import json
import logging
import pathlib
import shutil
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import torch

import determined as det
from determined import core
from determined.pytorch import _checkpoint, _metrics
from determined.pytorch._callback import PyTorchCallback
from determined.pytorch._units import ShouldExit, TrialState

if TYPE_CHECKING:
    from determined.core import Context as CoreContext
    from determined.core import DistributedContext
    from determined.pytorch._context import PyTorchTrialContext

logger = logging.getLogger("determined.pytorch")


def callback_overrides(callback: PyTorchCallback, name: str) -> bool:
    """Whether ``callback``'s class overrides the ``PyTorchCallback`` method ``name``."""
    return getattr(type(callback), name) is not getattr(PyTorchCallback, name)


def listed_state(checkpoint: dict[str, Any], key: str, legacy_key: str, count: int) -> list[Any]:
    """The ``key`` list of a checkpoint, or its pre-list single-object ``legacy_key`` form;
    an error unless it holds exactly ``count`` entries."""
    if legacy_key in checkpoint:
        if key in checkpoint:
            raise ValueError(f"the checkpoint has both {key!r} and {legacy_key!r}")
        if count > 1:
            raise ValueError(
                f"the checkpoint has one {legacy_key!r} but the trial wrapped {count} of them"
            )
        return [checkpoint[legacy_key]]
    values = list(checkpoint.get(key) or [])
    if len(values) != count:
        raise ValueError(
            f"the checkpoint has {len(values)} entries in {key!r} but the trial wrapped {count}; "
            "wrap the same models, optimizers and schedulers, in the same order"
        )
    return values


def copy_user_code(source: pathlib.Path, target: pathlib.Path) -> None:
    """Copy the trial's code (the experiment's context directory) into the checkpoint."""
    try:
        shutil.copytree(
            source,
            target,
            ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".git", "*.pth", "*.pt"),
            symlinks=True,
        )
    except (OSError, shutil.Error) as exc:
        logger.warning("could not copy the trial's code into the checkpoint: %s", exc)


def load_state_file(path: pathlib.Path) -> dict[str, Any]:
    """A checkpoint's state dict file, which must hold a dict."""
    loaded = _checkpoint.torch_load(path)
    if not isinstance(loaded, dict):
        raise ValueError(f"{path}: expected a dict, found a {type(loaded).__name__}")
    return loaded


class CheckpointSteps:
    """Saving and restoring the trial: the checkpoint half of the trial controller."""

    trial: Any
    context: PyTorchTrialContext
    core: CoreContext
    dist: DistributedContext
    is_chief: bool
    state: TrialState
    trial_id: int
    callbacks: dict[str, PyTorchCallback]
    train_seed: int | None
    batch_metrics: list[dict[str, Any]]
    local_training: bool

    # ---- reading ----------------------------------------------------------------------------
    def read_checkpoint(self, path: pathlib.Path) -> dict[str, Any] | None:
        """Read the checkpoint at ``path`` (before the data loaders are built): adopt its loop
        position when it is this trial's, and return what :meth:`apply_checkpoint` restores."""
        state_file = _checkpoint.find_state_file(path)
        if state_file is None:
            logger.warning("checkpoint %s has no state_dict.pth; starting fresh", path)
            return None
        checkpoint = load_state_file(state_file)
        saved_state = self.restore_loop_position(path, checkpoint)
        if saved_state is None:
            logger.info("checkpoint from another trial: loading its weights, starting at batch 0")
        elif saved_state.get("_legacy_epochs"):
            checkpoint["_det_legacy_epochs"] = True
        return checkpoint

    def restore_loop_position(
        self, path: pathlib.Path, checkpoint: dict[str, Any], pending_metrics: bool = True
    ) -> dict[str, Any] | None:
        """Adopt the loop position, shuffle seed and (with ``pending_metrics``) the unreported
        batch metrics of a checkpoint of this trial; return its saved trial state, or ``None``
        when the checkpoint belongs to another trial (then training starts at batch 0)."""
        saved_state = _checkpoint.read_trial_state(path, checkpoint)
        if saved_state is None or saved_state.get("trial_id") != self.trial_id:
            return None
        self.state = TrialState.from_dict(saved_state)
        self.state.trial_id = self.trial_id
        data_state = checkpoint.get("det_data_state") or {}
        self.train_seed = data_state.get("train_seed")
        if pending_metrics:
            self.batch_metrics = list(data_state.get("pending_batch_metrics") or [])
        return saved_state

    def apply_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Restore the objects the trial wrapped (after the data loaders are built)."""
        ctx = self.context
        self.notify_checkpoint_load_start(checkpoint)
        if checkpoint.pop("_det_legacy_epochs", False) and ctx._epoch_len:
            self.state.epochs_trained = self.state.batches_trained // ctx._epoch_len
        models = listed_state(checkpoint, "models_state_dict", "model_state_dict", len(ctx.models))
        for model, model_state in zip(ctx.models, models, strict=False):
            _checkpoint.load_model_state(model, model_state)
        self.restore_optimizers_and_schedulers(checkpoint)
        if "scaler_state_dict" in checkpoint:
            if ctx._scaler is not None:
                ctx._scaler.load_state_dict(checkpoint["scaler_state_dict"])
            else:
                logger.warning("the checkpoint has a GradScaler state but the trial uses none")
        elif ctx._scaler is not None:
            logger.warning("the trial uses a GradScaler but the checkpoint has no scaler state")
        per_rank = checkpoint.get("det_rank_rng_states")
        if isinstance(per_rank, list) and len(per_rank) == self.dist.size:
            _checkpoint.set_rng_state(per_rank[self.dist.rank], self.cuda_index())
        elif "rng_state" in checkpoint:
            _checkpoint.set_rng_state(checkpoint["rng_state"], self.cuda_index())
        else:
            logger.warning("the checkpoint has no RNG state to restore")
        self.restore_callbacks(checkpoint)

    def notify_checkpoint_load_start(self, checkpoint: dict[str, Any]) -> None:
        """Call every callback's ``on_checkpoint_load_start``."""
        for callback in self.callbacks.values():
            callback.on_checkpoint_load_start(checkpoint)

    def restore_optimizers_and_schedulers(self, checkpoint: dict[str, Any]) -> None:
        """Load the wrapped optimizers' and LR schedulers' states, in wrapping order."""
        ctx = self.context
        optimizers = listed_state(
            checkpoint, "optimizers_state_dict", "optimizer_state_dict", len(ctx.optimizers)
        )
        for optimizer, optimizer_state in zip(ctx.optimizers, optimizers, strict=False):
            optimizer.load_state_dict(optimizer_state)
        schedulers = listed_state(
            checkpoint, "lr_schedulers_state_dict", "lr_scheduler", len(ctx.lr_schedulers)
        )
        for scheduler, scheduler_state in zip(ctx.lr_schedulers, schedulers, strict=False):
            scheduler.load_state_dict(scheduler_state)

    def restore_callbacks(self, checkpoint: dict[str, Any]) -> None:
        """Load each callback's saved state (by its name in ``build_callbacks``)."""
        saved_callbacks = checkpoint.get("callbacks") or {}
        for name, callback in self.callbacks.items():
            if name in saved_callbacks:
                callback.load_state_dict(saved_callbacks[name])
            elif callback_overrides(callback, "load_state_dict"):
                logger.warning("callback %r has state but the checkpoint holds none for it", name)

    def cuda_index(self) -> int | None:
        """The CUDA device index whose RNG is saved and restored (``None`` on CPU)."""
        device = self.context.device
        return (device.index or 0) if device.type == "cuda" else None

    # ---- writing ----------------------------------------------------------------------------
    def checkpoint_is_current(self) -> bool:
        """Whether a checkpoint was taken at the current batch."""
        return self.state.last_ckpt == self.state.batches_trained

    def save_checkpoint(self, already_exiting: bool) -> None:
        """Take a checkpoint: the chief writes ``state_dict.pth`` with every rank's RNG state."""
        metadata = self.begin_checkpoint()
        rank_rng = self.dist.allgather(_checkpoint.get_rng_state(self.cuda_index()))
        with self.exit_on_invalid_hp(already_exiting):
            uuid = ""
            if metadata is not None:
                with self.core.checkpoint.store_path(metadata) as (path, storage_id):
                    self.write_checkpoint(pathlib.Path(path), rank_rng)
                    uuid = storage_id
            self.notify_checkpoint_uploaded(self.dist.broadcast(uuid))

    def begin_checkpoint(self) -> dict[str, Any] | None:
        """Mark the current batch as checkpointed; on the chief, set the status and return the
        checkpoint's metadata (``None`` on other ranks)."""
        self.state.last_ckpt = self.state.batches_trained
        if not self.is_chief:
            return None
        self.core.train.set_status("checkpointing")
        return {
            "determined_version": det.__version__,
            "steps_completed": self.state.batches_trained,
            "framework": f"torch-{torch.__version__}",
            "format": "pickle",
        }

    @contextlib.contextmanager
    def exit_on_invalid_hp(self, already_exiting: bool) -> Iterator[None]:
        """A ``det.InvalidHP`` raised while checkpointing ends the trial early (reported once)."""
        try:
            yield
        except det.InvalidHP:
            if not already_exiting:
                self.core.train.report_early_exit(core.EarlyExitReason.INVALID_HP)
                raise ShouldExit(skip_exit_checkpoint=True) from None
            raise

    def loop_state_dict(self) -> dict[str, Any]:
        """What every checkpoint holds besides the models: optimizers, LR schedulers, callbacks,
        the loop position and the data state (shuffle seed, unreported batch metrics)."""
        ctx = self.context
        return {
            "optimizers_state_dict": [optimizer.state_dict() for optimizer in ctx.optimizers],
            "lr_schedulers_state_dict": [s.state_dict() for s in ctx.lr_schedulers],
            "callbacks": {name: cb.state_dict() for name, cb in self.callbacks.items()},
            "det_trial_state": self.state.to_dict(),
            "det_data_state": {
                "train_seed": self.train_seed,
                "pending_batch_metrics": _metrics.batch_metrics_to_python(self.batch_metrics),
            },
            "det_format": _checkpoint.FORMAT_VERSION,
        }

    def write_checkpoint(self, path: pathlib.Path, rank_rng: list[dict[str, Any]]) -> None:
        """Write the chief's checkpoint files into ``path``."""
        ctx = self.context
        path.mkdir(parents=True, exist_ok=True)
        checkpoint: dict[str, Any] = {
            "models_state_dict": [model.state_dict() for model in ctx.models],
            **self.loop_state_dict(),
            "rng_state": rank_rng[0],
            "det_rank_rng_states": rank_rng,
        }
        if ctx._scaler is not None:
            checkpoint["scaler_state_dict"] = ctx._scaler.state_dict()
        for callback in self.callbacks.values():
            callback.on_checkpoint_save_start(checkpoint)
        torch.save(checkpoint, path / _checkpoint.STATE_FILE)
        self.write_trial_files(path, "PyTorchTrial")
        self.notify_checkpoint_written(path)

    def write_trial_files(self, path: pathlib.Path, trial_type: str) -> None:
        """``load_data.json`` (what ``load_trial_from_checkpoint_path`` needs) and, on a cluster,
        a copy of the trial's code; written by the chief."""
        ctx = self.context
        trial_cls = type(self.trial)
        try:
            exp_conf: dict[str, Any] | None = ctx.get_experiment_config()
        except ValueError:
            exp_conf = None
        load_data: dict[str, Any] = {
            "trial_type": trial_type,
            "experiment_config": exp_conf,
            "hparams": ctx._hparams,
            "trial_cls_spec": f"{trial_cls.__module__}:{trial_cls.__qualname__}",
            "is_trainer": True,
        }
        if ctx._is_pre_trainer:
            load_data.pop("is_trainer")
        (path / "load_data.json").write_text(json.dumps(load_data, default=str))
        if not self.local_training:
            copy_user_code(pathlib.Path.cwd(), path / "code")

    def notify_checkpoint_written(self, path: pathlib.Path) -> None:
        """Call the callbacks' ``on_checkpoint_write_end`` (and the deprecated
        ``on_checkpoint_end`` where a callback overrides it)."""
        for callback in self.callbacks.values():
            if callback_overrides(callback, "on_checkpoint_end"):
                callback.on_checkpoint_end(str(path))
            callback.on_checkpoint_write_end(str(path))

    def notify_checkpoint_uploaded(self, uuid: str) -> None:
        """Call the callbacks' ``on_checkpoint_upload_end`` with the checkpoint's id."""
        for callback in self.callbacks.values():
            callback.on_checkpoint_upload_end(uuid=uuid)
