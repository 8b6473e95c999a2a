"""``DeepSpeedTrialContext``: what a DeepSpeedTrial uses to register its engines, and the config helper.

The context is a :class:`~determined.pytorch.PyTorchTrialContext` whose models are DeepSpeed engines:
hyperparameters, experiment config, trial ids, TensorBoard, profiling, ``to_device``, epoch helpers,
custom reducers and the wrapping of optimizers/LR schedulers that no engine owns are the PyTorch
context's own. What differs: engines are registered with :meth:`wrap_model_engine` and take their
own steps (``engine.backward``/``engine.step``), batch sizes come from the DeepSpeed config, and the
device is the GPU of the rank, or the CPU when there is none (upstream refused to run without GPUs).
"""

from __future__ import annotations

import copy
import json
import logging
import pathlib
import warnings
from typing import TYPE_CHECKING, Any

import torch

import deepspeed
from determined.pytorch import LRScheduler, PyTorchTrialContext
from determined.pytorch.deepspeed._mpu import (
    ModelParallelUnit,
    make_data_parallel_mpu,
    make_deepspeed_mpu,
)

if TYPE_CHECKING:
    from determined import core

logger = logging.getLogger("determined.pytorch.deepspeed")


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r}")
        out[key] = value
    return out


def _merge(base: dict[str, Any], source: dict[str, Any]) -> dict[str, Any]:
    for key, value in source.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            base[key] = _merge(base[key], value)
        else:
            base[key] = copy.deepcopy(value)
    return base


def overwrite_deepspeed_config(
    base_ds_config: str | pathlib.Path | dict[str, Any], source_ds_dict: dict[str, Any]
) -> dict[str, Any]:
    """A DeepSpeed config: ``base_ds_config`` with the leaves of ``source_ds_dict`` written over it.

    Typical use lets hyperparameters override the config file::

        ds_config = overwrite_deepspeed_config("ds_config.json", context.get_hparam("overwrite"))

    Args:
        base_ds_config: a path to a DeepSpeed JSON config (duplicate keys are refused, as DeepSpeed
            does) or a config dict (not modified: unlike upstream, the result is a new dict).
        source_ds_dict: nested values to write over the base; dicts merge key by key, anything else
            replaces the base's value.
    """
    if isinstance(base_ds_config, (str, pathlib.Path)):
        path = pathlib.Path(base_ds_config)
        try:
            base = json.loads(path.read_text(), object_pairs_hook=_no_duplicate_keys)
        except OSError as exc:
            raise ValueError(f"base_ds_config: cannot read {str(path)!r}: {exc}") from None
        except ValueError as exc:
            raise ValueError(
                f"base_ds_config: {str(path)!r} is not a valid config: {exc}"
            ) from None
        if not isinstance(base, dict):
            raise ValueError(f"base_ds_config: {str(path)!r} must hold a JSON object")
    elif isinstance(base_ds_config, dict):
        base = copy.deepcopy(base_ds_config)
    else:
        raise TypeError(
            "base_ds_config: expected a path to a JSON file or a dict, not "
            f"{type(base_ds_config).__name__}"
        )
    if not isinstance(source_ds_dict, dict):
        raise TypeError(f"source_ds_dict: expected a dict, not {type(source_ds_dict).__name__}")
    return _merge(base, source_ds_dict)


def _engine_owned(engine: Any) -> list[Any]:
    """The optimizer and LR scheduler objects a DeepSpeed engine steps and checkpoints itself."""
    owned = []
    for name in ("optimizer", "client_optimizer", "basic_optimizer", "lr_scheduler",
                 "client_lr_scheduler"):  # fmt: skip
        value = getattr(engine, name, None)
        if value is not None:
            owned.append(value)
            inner = getattr(value, "optimizer", None)  # ZeRO wraps the torch optimizer
            if inner is not None:
                owned.append(inner)
    return owned


class DeepSpeedTrialContext(PyTorchTrialContext):
    """Runtime information and the registration API of a :class:`DeepSpeedTrial`.

    In the trial's ``__init__``: build the model, call ``deepspeed.initialize(...)`` (its config
    perhaps from :func:`overwrite_deepspeed_config`) and register the engine with
    :meth:`wrap_model_engine`. The engine owns its optimizer, LR scheduler, gradient accumulation,
    mixed precision and checkpoint shards. Created by :func:`determined.pytorch.deepspeed.init`.
    """

    def __init__(
        self,
        core_context: core.Context,
        trial_seed: int | None,
        hparams: dict[str, Any] | None,
        slots_per_trial: int,
        num_gpus: int,
        exp_conf: dict[str, Any] | None,
        steps_completed: int,
        enable_tensorboard_logging: bool = True,
        debug_enabled: bool = False,
    ) -> None:
        super().__init__(
            core_context=core_context,
            trial_seed=trial_seed,
            hparams=hparams,
            slots_per_trial=slots_per_trial,
            num_gpus=num_gpus,
            exp_conf=exp_conf,
            aggregation_frequency=1,
            steps_completed=steps_completed,
            managed_training=True,
            debug_enabled=debug_enabled,
            enable_tensorboard_logging=enable_tensorboard_logging,
        )
        self._ddp = False  # engines do their own gradient exchange
        self._mpu: ModelParallelUnit = make_data_parallel_mpu(self.distributed)
        self._called_set_mpu = False
        self._train_micro_batch_size_per_gpu: int | None = None
        self._num_micro_batches_per_slot: int | None = None
        self._use_pipeline_parallel = False
        self._manual_grad_accumulation = False
        self._hparam_global_batch_size = self._global_batch_size
        self._check_optimizations_config()

    def _check_optimizations_config(self) -> None:
        """The experiment config's ``optimizations`` that DeepSpeed's config owns instead."""
        optimizations = dict((self._exp_conf or {}).get("optimizations") or {})
        if optimizations.get("mixed_precision", "O0") != "O0":
            raise ValueError(
                "optimizations.mixed_precision: set mixed precision in the DeepSpeed config "
                '("fp16"/"bf16"), not in the experiment config'
            )
        if int(optimizations.get("aggregation_frequency", 1) or 1) > 1:
            raise ValueError(
                "optimizations.aggregation_frequency: set gradient accumulation in the DeepSpeed "
                'config ("gradient_accumulation_steps"), not in the experiment config'
            )

    # ---- engines ----------------------------------------------------------------------------
    def wrap_model_engine(self, model: deepspeed.DeepSpeedEngine) -> deepspeed.DeepSpeedEngine:
        """Register a DeepSpeed engine (returned unchanged) for training, checkpointing and resume.

        The first engine sets the micro batch size, the gradient accumulation steps and the batch
        sizes; a ``PipelineEngine`` switches to pipeline mode and its grid decides which ranks read
        data. Call for every engine, in the same order every time.
        """
        if not isinstance(model, deepspeed.DeepSpeedEngine):
            raise TypeError(
                "wrap_model_engine: expected the engine returned by deepspeed.initialize(), not a "
                f"{type(model).__name__}"
            )
        if any(model is engine for engine in self.models):
            raise ValueError("wrap_model_engine: this engine is already wrapped")
        if isinstance(model, deepspeed.PipelineEngine):
            self._use_pipeline_parallel = True
            if not self.models and not self._called_set_mpu:
                self._mpu = make_deepspeed_mpu(model.mpu)
            elif self.models:
                logger.warning("data loading follows the first wrapped engine's pipeline grid")
        micro = int(model.train_micro_batch_size_per_gpu())
        steps = int(model.gradient_accumulation_steps())
        if not self.models:
            self._train_micro_batch_size_per_gpu = micro
            self._num_micro_batches_per_slot = steps
            self._set_batch_sizes(int(model.train_batch_size()), micro * steps)
        elif (micro, steps) != (
            self._train_micro_batch_size_per_gpu,
            self._num_micro_batches_per_slot,
        ):
            logger.warning(
                "engine %d has train_micro_batch_size_per_gpu=%d and gradient_accumulation_steps=%d;"
                " the loop feeds every engine like the first one (%s, %s)",
                len(self.models) + 1,
                micro,
                steps,
                self._train_micro_batch_size_per_gpu,
                self._num_micro_batches_per_slot,
            )
        self._check_not_engine_owned(model, self.optimizers, "wrap_optimizer")
        self._check_not_engine_owned(model, [s.scheduler for s in self.lr_schedulers],
                                     "wrap_lr_scheduler")  # fmt: skip
        self.models.append(model)
        return model

    def _set_batch_sizes(self, global_batch_size: int, per_slot_batch_size: int) -> None:
        expected = self._hparam_global_batch_size
        if expected is not None and expected != global_batch_size:
            logger.warning(
                "the global_batch_size hyperparameter (%d) differs from the DeepSpeed config's "
                "train_batch_size (%d); the DeepSpeed config wins",
                expected,
                global_batch_size,
            )
        self._global_batch_size = global_batch_size
        self._per_slot_batch_size = per_slot_batch_size

    @staticmethod
    def _check_not_engine_owned(engine: Any, objects: list[Any], method: str) -> None:
        owned = _engine_owned(engine)
        if any(obj is other for obj in objects for other in owned):
            raise ValueError(
                f"{method}: this object belongs to a DeepSpeed engine, which steps and "
                "checkpoints it itself; wrap only optimizers/schedulers no engine owns"
            )

    def wrap_model(self, model: torch.nn.Module) -> torch.nn.Module:
        """Not for DeepSpeed: build an engine with ``deepspeed.initialize`` and use
        :meth:`wrap_model_engine`."""
        raise RuntimeError(
            "wrap_model: a DeepSpeedTrial registers engines: engine = deepspeed.initialize(...)[0]; "
            "context.wrap_model_engine(engine)"
        )

    def wrap_optimizer(
        self,
        optimizer: torch.optim.Optimizer,
        backward_passes_per_step: int = 1,
        fp16_compression: bool | None = None,
        average_aggregated_gradients: bool | None = None,
    ) -> torch.optim.Optimizer:
        """Register an optimizer that no engine owns (returned unchanged) so it is checkpointed
        and restored; step it yourself. Optimizers given to ``deepspeed.initialize`` are the
        engine's and must not be wrapped."""
        for engine in self.models:
            self._check_not_engine_owned(engine, [optimizer], "wrap_optimizer")
        return super().wrap_optimizer(
            optimizer, backward_passes_per_step, fp16_compression, average_aggregated_gradients
        )

    def wrap_lr_scheduler(
        self, lr_scheduler: Any, step_mode: LRScheduler.StepMode, frequency: int = 1
    ) -> Any:
        """Register an LR scheduler of a wrapped optimizer (returned unchanged): checkpointed, and
        stepped per ``step_mode`` after each batch. An engine's own scheduler (from the DeepSpeed
        config or ``deepspeed.initialize(lr_scheduler=...)``) is stepped by ``engine.step()``."""
        for engine in self.models:
            self._check_not_engine_owned(engine, [lr_scheduler], "wrap_lr_scheduler")
        return super().wrap_lr_scheduler(lr_scheduler, step_mode, frequency)

    def backward(self, *args: Any, **kwargs: Any) -> None:
        """Not for DeepSpeed: call ``engine.backward(loss)``."""
        raise RuntimeError("backward: call engine.backward(loss) on the DeepSpeed engine")

    def step_optimizer(self, *args: Any, **kwargs: Any) -> None:
        """Not for DeepSpeed: call ``engine.step()``."""
        raise RuntimeError("step_optimizer: call engine.step() on the DeepSpeed engine")

    def wrap_scaler(self, scaler: Any) -> Any:
        """Not for DeepSpeed: mixed precision is configured in the DeepSpeed config."""
        raise RuntimeError(
            'mixed precision: set "fp16" or "bf16" in the DeepSpeed config; the engine scales '
            "the loss itself"
        )

    # ---- parallelism and data ---------------------------------------------------------------
    def set_mpu(self, mpu: ModelParallelUnit) -> None:
        """Use a custom model-parallel topology (after :meth:`wrap_model_engine`, once): it decides
        which ranks build data loaders and report metrics, and how data is sharded."""
        if not isinstance(mpu, ModelParallelUnit):
            raise TypeError(
                f"set_mpu: expected a det.pytorch.deepspeed.ModelParallelUnit, not "
                f"{type(mpu).__name__}"
            )
        if not self.models:
            raise RuntimeError("set_mpu: call wrap_model_engine() first")
        if self._called_set_mpu:
            raise RuntimeError("set_mpu: may be called only once")
        self._called_set_mpu = True
        self._mpu = mpu

    def disable_auto_grad_accumulation(self) -> None:
        """Call ``train_batch`` once per optimizer step instead of once per micro batch; it must
        then consume ``get_num_micro_batches_per_slot()`` micro batches itself."""
        self._manual_grad_accumulation = True

    def disable_dataset_reproducibility_checks(self) -> None:
        """Allow the loader builders to return any torch DataLoader (you then own shuffling,
        sharding and resuming; det skips already-trained micro batches by iterating past them)."""
        self.experimental.disable_dataset_reproducibility_checks()

    @property
    def use_pipeline_parallel(self) -> bool:
        """Whether the first engine is a ``deepspeed.PipelineEngine``."""
        return self._use_pipeline_parallel

    def get_train_micro_batch_size_per_gpu(self) -> int:
        """The micro batch size of the first engine (``train_micro_batch_size_per_gpu``)."""
        if self._train_micro_batch_size_per_gpu is None:
            raise RuntimeError("train_micro_batch_size_per_gpu: call wrap_model_engine() first")
        return self._train_micro_batch_size_per_gpu

    def get_num_micro_batches_per_slot(self) -> int:
        """Micro batches per optimizer step on each rank (``gradient_accumulation_steps``)."""
        if self._num_micro_batches_per_slot is None:
            raise RuntimeError("num_micro_batches_per_slot: call wrap_model_engine() first")
        return self._num_micro_batches_per_slot

    @property
    def train_micro_batch_size_per_gpu(self) -> int:
        """Deprecated: use :meth:`get_train_micro_batch_size_per_gpu`."""
        warnings.warn(
            "DeepSpeedTrialContext.train_micro_batch_size_per_gpu is deprecated: use "
            "get_train_micro_batch_size_per_gpu()",
            FutureWarning,
            stacklevel=2,
        )
        return self.get_train_micro_batch_size_per_gpu()

    @property
    def num_micro_batches_per_slot(self) -> int:
        """Deprecated: use :meth:`get_num_micro_batches_per_slot`."""
        warnings.warn(
            "DeepSpeedTrialContext.num_micro_batches_per_slot is deprecated: use "
            "get_num_micro_batches_per_slot()",
            FutureWarning,
            stacklevel=2,
        )
        return self.get_num_micro_batches_per_slot()

    def get_global_batch_size(self) -> int:
        """Samples per optimizer step over all ranks: the DeepSpeed config's ``train_batch_size``
        once an engine is wrapped, before that the ``global_batch_size`` hyperparameter."""
        return super().get_global_batch_size()

    def get_per_slot_batch_size(self) -> int:
        """Samples per optimizer step on each rank: micro batch size x accumulation steps once an
        engine is wrapped, before that ``global_batch_size // slots``."""
        return super().get_per_slot_batch_size()
