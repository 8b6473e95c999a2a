"""``PyTorchTrialContext``: what a PyTorchTrial uses to wrap its objects and take training steps."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed
import torch.nn as nn

from determined.pytorch._context_steps import GradientSteps
from determined.pytorch._context_tensorboard import TensorBoardSteps
from determined.pytorch._data import _on_cpu_already, to_device
from determined.pytorch._lr_scheduler import LRScheduler
from determined.pytorch._reducer import _PyTorchReducerContext

if TYPE_CHECKING:
    from determined import core

logger = logging.getLogger("determined.pytorch")


class _DistributedDataParallel(nn.parallel.DistributedDataParallel):
    """torch DDP whose unknown attributes resolve on the wrapped model (``model.my_layer`` keeps
    working after ``wrap_model``). ``.module`` is the model itself."""

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self.module, name)


def calculate_batch_sizes(hparams: dict[str, Any], slots: int) -> tuple[int, int]:
    """``(per_slot, global)`` batch sizes from the ``global_batch_size`` hyperparameter."""
    slots = max(slots, 1)
    global_batch_size = hparams["global_batch_size"]
    if isinstance(global_batch_size, bool) or not isinstance(global_batch_size, int):
        raise ValueError(
            "hyperparameters.global_batch_size: must be an integer, not "
            f"{type(global_batch_size).__name__}"
        )
    if global_batch_size < slots:
        raise ValueError(
            f"hyperparameters.global_batch_size: {global_batch_size} is smaller than the number "
            f"of slots ({slots})"
        )
    per_slot = global_batch_size // slots
    if per_slot * slots != global_batch_size:
        logger.warning(
            "global_batch_size changed from %d to %d to divide equally across %d slots",
            global_batch_size,
            per_slot * slots,
            slots,
        )
    return per_slot, per_slot * slots


class PyTorchExperimentalContext:
    """``context.experimental``: AMP and the data-handling switches."""

    def __init__(self, parent: PyTorchTrialContext) -> None:
        self._parent = parent
        self._auto_amp = False
        self._data_repro_checks_disabled = False
        self._auto_to_device = True

    def use_amp(self) -> None:
        """Automatic mixed precision: forward passes of wrapped models run under autocast, the loss
        is scaled in ``backward``, gradients unscaled before clipping, the optimizer stepped through
        the scaler and the scaler updated once per batch. Call before ``wrap_model``.

        AMP needs a GPU; on CPU training stays in full precision (as upstream's CUDA AMP did).
        """
        device_type = self._parent.device.type
        scaler = torch.amp.GradScaler(device_type, enabled=device_type == "cuda")
        self._parent.wrap_scaler(scaler)
        self._auto_amp = True
        if device_type != "cuda":
            logger.info("use_amp(): no GPU, training in full precision")

    def disable_dataset_reproducibility_checks(self) -> None:
        """Allow the loader builders to return any torch DataLoader (you then own reproducibility,
        sharding and resuming: det only skips already-trained batches by iterating past them)."""
        self._data_repro_checks_disabled = True

    def disable_auto_to_device(self) -> None:
        """Hand batches to ``train_batch``/``evaluate_batch`` as the loader made them (call
        ``context.to_device`` yourself)."""
        self._auto_to_device = False


class PyTorchTrialContext(GradientSteps, TensorBoardSteps, _PyTorchReducerContext):
    """Runtime information and the wrapping API of a PyTorchTrial.

    Wrap every model, optimizer and LR scheduler (``wrap_model``, ``wrap_optimizer``,
    ``wrap_lr_scheduler``) so det can place them on the device, distribute them, checkpoint them and
    restore them exactly; take steps with :meth:`backward` and :meth:`step_optimizer`.

    Created by :func:`determined.pytorch.init`; not meant to be built directly.
    """

    def __init__(
        self,
        core_context: core.Context,
        trial_seed: int | None,
        hparams: dict[str, Any] | None,
        slots_per_trial: int,
        num_gpus: int,
        exp_conf: dict[str, Any] | None,
        aggregation_frequency: int,
        steps_completed: int,
        managed_training: bool,
        debug_enabled: bool,
        enable_tensorboard_logging: bool = True,
    ) -> None:
        if (
            isinstance(aggregation_frequency, bool)
            or not isinstance(aggregation_frequency, int)
            or aggregation_frequency < 1
        ):
            raise ValueError(
                f"aggregation_frequency: must be a positive int, got {aggregation_frequency!r}"
            )
        self._core = core_context
        self.distributed = core_context.distributed
        super().__init__(self.distributed.allgather)
        self._hparams = hparams
        self._per_slot_batch_size: int | None = None
        self._global_batch_size: int | None = None
        if hparams and hparams.get("global_batch_size") is not None:
            self._per_slot_batch_size, self._global_batch_size = calculate_batch_sizes(
                hparams, slots_per_trial
            )
        self._num_gpus = num_gpus
        self._exp_conf = exp_conf
        self._trial_seed = trial_seed
        self._steps_completed = steps_completed
        self._managed_training = managed_training
        self._debug_enabled = debug_enabled
        self._aggregation_frequency = aggregation_frequency
        self._enable_tensorboard_logging = enable_tensorboard_logging
        self.device = self._init_device()
        self._on_cpu = self.device.type == "cpu"
        self.models: list[nn.Module] = []
        self.optimizers: list[torch.optim.Optimizer] = []
        self.lr_schedulers: list[LRScheduler] = []
        self.profiler: Any = None
        self.experimental = PyTorchExperimentalContext(self)
        self._scaler: Any = None
        self._use_apex = False
        self._optimizer_configs: dict[int, dict[str, Any]] = {}
        self._average_aggregated_gradients_default = True
        self._fp16_compression_default = False
        self._is_pre_trainer = False
        self._stop_requested = False
        self._epoch_len: int | None = None
        self._current_batch_idx: int | None = None
        self._to_device_warned_types: set[type] = set()
        self._tbd_writer: Any = None
        self._last_tb_reset_ts: float | None = None
        self._ddp = self.distributed.size > 1 and managed_training

    # ---- device -----------------------------------------------------------------------------
    def _init_device(self) -> torch.device:
        if self._num_gpus > 0 and torch.cuda.is_available():
            index = self.distributed.local_rank if self.distributed.size > 1 else 0
            device = torch.device("cuda", index)
            torch.cuda.set_device(device)
            return device
        return torch.device("cpu")

    def to_device(self, data: Any) -> Any:
        """``data`` (tensors, arrays, or dicts/lists/tuples of them) on this trial's device."""
        if self._on_cpu and _on_cpu_already(data):
            return data
        return to_device(data, self.device, self._to_device_warned_types)

    # ---- hyperparameters and configuration --------------------------------------------------
    def get_hparams(self) -> dict[str, Any]:
        """Every hyperparameter of this trial."""
        if self._hparams is None:
            raise ValueError(
                "hparams: this trial has none; pass hparams= to det.pytorch.init() "
                "(on a cluster: det.get_cluster_info().trial.hparams)"
            )
        return self._hparams

    def get_hparam(self, name: str) -> Any:
        """The value of hyperparameter ``name``."""
        hparams = self.get_hparams()
        if name not in hparams:
            raise ValueError(
                f"hparams: no hyperparameter named {name!r} (have: {', '.join(sorted(hparams))})"
            )
        if name == "global_batch_size":
            logger.warning(
                "use context.get_per_slot_batch_size() and context.get_global_batch_size() "
                "instead of the global_batch_size hyperparameter"
            )
        return hparams[name]

    def get_global_batch_size(self) -> int:
        """The batch size of one step over all ranks (the ``global_batch_size`` hyperparameter)."""
        if self._global_batch_size is None:
            raise ValueError(
                "global_batch_size: not defined; add an integer global_batch_size hyperparameter"
            )
        return self._global_batch_size

    def get_per_slot_batch_size(self) -> int:
        """The batch size on each rank: ``global_batch_size // slots``."""
        if self._per_slot_batch_size is None:
            raise ValueError(
                "global_batch_size: not defined; add an integer global_batch_size hyperparameter"
            )
        return self._per_slot_batch_size

    def get_experiment_config(self) -> dict[str, Any]:
        if self._exp_conf is None:
            raise ValueError("exp_conf: not set; pass exp_conf= to det.pytorch.init()")
        return self._exp_conf

    def get_data_config(self) -> dict[str, Any]:
        """The experiment config's ``data`` section."""
        return dict(self.get_experiment_config().get("data") or {})

    def get_experiment_id(self) -> int:
        """The experiment's id (0 off-cluster)."""
        return int(self._core.train._exp_id)

    def get_trial_id(self) -> int:
        """The trial's id (0 off-cluster)."""
        return int(self._core.train._trial_id)

    def get_trial_seed(self) -> int:
        if self._trial_seed is None:
            raise ValueError(
                "trial seed: not set off-cluster unless exp_conf has reproducibility.experiment_seed"
            )
        return self._trial_seed

    def get_initial_batch(self) -> int:
        return self._steps_completed

    def get_stop_requested(self) -> bool:
        return self._stop_requested

    def set_stop_requested(self, stop_requested: bool) -> None:
        """Ask training to stop: the loop checkpoints and returns at its next safe point."""
        if not isinstance(stop_requested, bool):
            raise TypeError(f"stop_requested: must be a bool, not {type(stop_requested).__name__}")
        self._stop_requested = stop_requested

    # ---- epochs and batches -----------------------------------------------------------------
    def _require_training(self) -> int:
        if self._current_batch_idx is None:
            raise RuntimeError("training has not started")
        return self._current_batch_idx

    def _require_epoch_len(self) -> int:
        if self._epoch_len is None:
            raise RuntimeError("the training data loader is not built yet")
        return self._epoch_len

    def is_epoch_start(self) -> bool:
        """Whether the current batch is the first of an epoch."""
        return self._require_training() % self._require_epoch_len() == 0

    def is_epoch_end(self) -> bool:
        """Whether the current batch is the last of an epoch."""
        epoch_len = self._require_epoch_len()
        return self._require_training() % epoch_len == epoch_len - 1

    def current_train_epoch(self) -> int:
        return self._require_training() // self._require_epoch_len()

    def current_train_batch(self) -> int:
        return self._require_training()

    # ---- wrapping ---------------------------------------------------------------------------
    def wrap_model(self, model: nn.Module) -> nn.Module:
        """The model on this trial's device; under distributed training a DDP module whose unknown
        attributes resolve on ``model``. Call for every model, in the same order every time."""
        if not isinstance(model, nn.Module):
            raise TypeError(f"wrap_model: expected a torch.nn.Module, not {type(model).__name__}")
        wrapped = model
        if self._managed_training:
            model.to(self.device)
            if self._ddp:
                if not torch.distributed.is_available() or not torch.distributed.is_initialized():
                    raise RuntimeError(
                        "wrap_model: distributed training needs torch.distributed; start the "
                        "trial with python -m determined.launch.torch_distributed"
                    )
                device_ids = [self.device.index] if self.device.type == "cuda" else None
                wrapped = _DistributedDataParallel(model, device_ids=device_ids)
            if self.experimental._auto_amp and self.device.type == "cuda":
                _install_autocast(model, self.device.type)
        self.models.append(wrapped)
        return wrapped

    def wrap_optimizer(
        self,
        optimizer: torch.optim.Optimizer,
        backward_passes_per_step: int = 1,
        fp16_compression: bool | None = None,
        average_aggregated_gradients: bool | None = None,
    ) -> torch.optim.Optimizer:
        """Register ``optimizer`` (returned unchanged) for checkpointing and ``step_optimizer``.

        Args:
            backward_passes_per_step: accepted for compatibility (Horovod only).
            fp16_compression: accepted for compatibility (Horovod only).
            average_aggregated_gradients: divide gradients accumulated over
                ``aggregation_frequency`` batches by it before stepping (default True).
        """
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise TypeError(
                f"wrap_optimizer: expected a torch.optim.Optimizer, not {type(optimizer).__name__}"
            )
        if backward_passes_per_step < 1:
            raise ValueError(
                f"backward_passes_per_step: must be at least 1, got {backward_passes_per_step}"
            )
        if average_aggregated_gradients is None:
            average_aggregated_gradients = self._average_aggregated_gradients_default
        self._optimizer_configs[id(optimizer)] = {
            "average_aggregated_gradients": bool(average_aggregated_gradients)
        }
        self.optimizers.append(optimizer)
        return optimizer

    def wrap_lr_scheduler(
        self,
        lr_scheduler: Any,
        step_mode: LRScheduler.StepMode,
        frequency: int = 1,
    ) -> Any:
        """Register ``lr_scheduler`` (returned unchanged) to be checkpointed and stepped per
        ``step_mode`` every ``frequency`` batches, optimizer steps or epochs."""
        if isinstance(lr_scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau) and (
            step_mode != LRScheduler.StepMode.MANUAL_STEP
        ):
            raise ValueError(
                "wrap_lr_scheduler: ReduceLROnPlateau needs step_mode=MANUAL_STEP (step it "
                "yourself, e.g. from a callback's on_validation_end(metrics))"
            )
        optimizer = getattr(lr_scheduler, "optimizer", None)
        if optimizer is not None and all(optimizer is not o for o in self.optimizers):
            raise ValueError(
                "wrap_lr_scheduler: the scheduler's optimizer must be one returned by "
                "wrap_optimizer()"
            )
        self.lr_schedulers.append(LRScheduler(lr_scheduler, step_mode, frequency))
        return lr_scheduler

    def wrap_scaler(self, scaler: Any) -> Any:
        """Register an AMP ``GradScaler`` (returned unchanged) for checkpointing; pass it to
        ``step_optimizer(..., scaler=scaler)``. Call once, before ``wrap_model``."""
        if self._scaler is not None:
            raise ValueError("wrap_scaler: call wrap_scaler() or experimental.use_amp() only once")
        if self.models:
            raise ValueError("wrap_scaler: call it before wrap_model()")
        self._scaler = scaler
        return scaler

    def configure_apex_amp(self, *args: Any, **kwargs: Any) -> Any:
        """Apex AMP is not supported: use ``experimental.use_amp()`` or ``wrap_scaler()``."""
        raise RuntimeError(
            "configure_apex_amp: apex is not supported by det; use "
            "context.experimental.use_amp() or torch.amp with context.wrap_scaler()"
        )

    # ---- private setters of the legacy entrypoint path --------------------------------------
    def _set_default_gradient_compression(self, gradient_compression: bool) -> None:
        self._fp16_compression_default = gradient_compression

    def _set_default_average_aggregated_gradients(self, average_aggregated_gradients: bool) -> None:
        self._average_aggregated_gradients_default = average_aggregated_gradients

    def _set_is_pre_trainer(self) -> None:
        self._is_pre_trainer = True


def _install_autocast(model: nn.Module, device_type: str) -> None:
    """Run ``model``'s forward under autocast and hand back float32 outputs (hooks on the real
    module: no proxy class, unlike upstream)."""
    contexts: list[Any] = []

    def enter(module: nn.Module, args: Any) -> None:
        context = torch.autocast(device_type=device_type)
        context.__enter__()
        contexts.append(context)

    def leave(module: nn.Module, args: Any, output: Any) -> Any:
        if contexts:
            contexts.pop().__exit__(None, None, None)
        return _to_float32(output)

    model.register_forward_pre_hook(enter)
    model.register_forward_hook(leave, always_call=True)


def _to_float32(output: Any) -> Any:
    if isinstance(output, torch.Tensor):
        return output.float() if output.dtype in (torch.float16, torch.bfloat16) else output
    if isinstance(output, dict):
        return {k: _to_float32(v) for k, v in output.items()}
    if isinstance(output, list):
        return [_to_float32(v) for v in output]
    if isinstance(output, tuple):
        return tuple(_to_float32(v) for v in output)
    return output
