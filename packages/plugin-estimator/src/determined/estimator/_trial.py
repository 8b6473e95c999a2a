"""What a user writes: EstimatorTrial, the EstimatorTrialContext it receives, and RunHook."""

from __future__ import annotations

import abc
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import tensorflow as tf

from determined.estimator._reducer import MetricReducer, make_metric

if TYPE_CHECKING:
    import determined as det

logger = logging.getLogger("determined.estimator")

ServingInputReceiverFn = Callable[..., Any]
"""A function returning a ``tf.estimator.export.ServingInputReceiver`` (or its Tensor variant)."""


class EstimatorTrialContext:
    """The runtime information and wrappers an :class:`EstimatorTrial` gets from det.

    Attributes:
        distributed: the Core API DistributedContext of this process.
    """

    def __init__(self, core_context: det.core.Context, cluster_info: det.ClusterInfo) -> None:
        self._core = core_context
        self._info = cluster_info
        self.distributed = core_context.distributed
        self._stop_requested = False
        self.optimizer_initialized = False
        self.dataset_initialized = False

    # ---- hyperparameters and config -------------------------------------------------------------
    def get_hparams(self) -> dict[str, Any]:
        """The trial's hyperparameters."""
        return dict(self._info.trial.hparams)

    def get_hparam(self, name: str) -> Any:
        """One hyperparameter; KeyError naming the ones that exist when ``name`` is not among them."""
        hparams = self._info.trial.hparams
        if name not in hparams:
            raise KeyError(
                f"hyperparameter {name!r} is not defined; this trial has: {sorted(hparams)}"
            )
        return hparams[name]

    def get_experiment_config(self) -> dict[str, Any]:
        return dict(self._info.trial.config)

    def get_data_config(self) -> dict[str, Any]:
        """The experiment config's ``data`` section (``{}`` when it has none)."""
        return dict(self._info.trial.config.get("data") or {})

    def get_experiment_id(self) -> int:
        return self._info.trial.experiment_id

    def get_trial_id(self) -> int:
        return self._info.trial.trial_id

    def get_trial_seed(self) -> int:
        return self._info.trial.trial_seed

    def get_global_batch_size(self) -> int:
        """The ``global_batch_size`` hyperparameter: the batch size across all slots."""
        value = self._info.trial.hparams.get("global_batch_size")
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(
                "hyperparameters.global_batch_size: the batch-size getters need a positive integer "
                f"global_batch_size hyperparameter, got {value!r}"
            )
        return value

    def get_per_slot_batch_size(self) -> int:
        """The batch size of one slot: ``global_batch_size // slots``."""
        size = max(self.distributed.size, 1)
        global_batch_size = self.get_global_batch_size()
        if global_batch_size < size:
            raise ValueError(
                f"hyperparameters.global_batch_size: {global_batch_size} is smaller than the "
                f"{size} slots of this trial"
            )
        if global_batch_size % size:
            logger.warning(
                "global_batch_size %d is not divisible by %d slots; using %d per slot",
                global_batch_size,
                size,
                global_batch_size // size,
            )
        return global_batch_size // size

    # ---- stopping ---------------------------------------------------------------------------------
    def get_stop_requested(self) -> bool:
        return self._stop_requested

    def set_stop_requested(self, stop_requested: bool) -> None:
        """Ask det to end the trial after the current batch (it checkpoints first)."""
        if not isinstance(stop_requested, bool):
            raise TypeError(f"set_stop_requested: expected a bool, got {stop_requested!r}")
        self._stop_requested = stop_requested

    # ---- wrappers ---------------------------------------------------------------------------------
    def wrap_optimizer(self, optimizer: Any) -> Any:
        """Return ``optimizer`` ready for this trial's training (unchanged on one slot).

        Upstream wrapped it with Horovod for multi-slot trials; det trains EstimatorTrials on one slot.
        """
        if isinstance(optimizer, str):
            raise TypeError("wrap_optimizer: pass an optimizer object, not the name " + optimizer)
        self.optimizer_initialized = True
        return optimizer

    def wrap_dataset(self, dataset: Any, shard_dataset: bool = True) -> Any:
        """Return ``dataset`` sharded for this process (every slot sees different records).

        Args:
            dataset: a ``tf.data.Dataset``.
            shard_dataset: ``False`` leaves sharding to you.
        """
        self.dataset_initialized = True
        size = self.distributed.size
        if size <= 1 or not shard_dataset:
            return dataset
        return dataset.shard(size, self.distributed.rank)

    def make_metric(
        self,
        metric: Any,
        reducer: Callable[[list[Any]], Any] | MetricReducer,
        numpy_dtype: Any,
    ) -> tuple[Any, Any]:
        """An ``eval_metric_ops`` entry computed by ``reducer`` over every evaluation batch.

        ``metric`` is a tensor, a flat list of tensors or a flat dict of tensors; ``reducer`` is a
        function of the list of per-batch values, or a :class:`MetricReducer`; ``numpy_dtype`` is the
        result's dtype. Returns ``(value_op, update_op)`` like ``tf.compat.v1.metrics.*``.
        """
        return make_metric(metric, reducer, numpy_dtype, self.distributed.allgather)


class RunHook(tf.estimator.SessionRunHook):  # type: ignore[misc]
    """A ``SessionRunHook`` for ``TrainSpec.hooks`` that also hears about det's checkpoints."""

    def on_checkpoint_load(self, checkpoint_dir: str) -> None:
        """Called once at start-up with the checkpoint the trial resumes from (never on a fresh start)."""

    def on_checkpoint_end(self, checkpoint_dir: str) -> None:
        """Called after det wrote a checkpoint into ``checkpoint_dir``, before it is uploaded.

        Files written here become part of the checkpoint.
        """

    def on_trial_close(self) -> None:
        """Called once when training ends, for any reason."""


class EstimatorTrial(abc.ABC):
    """A model trained with ``tf.estimator``: det builds the Estimator and runs it.

    det trains in graph mode with TensorFlow 2 behaviour disabled (as upstream did): the training
    input is repeated forever and ``TrainSpec.max_steps`` is ignored; the searcher's ``max_length``
    decides how long to train.
    """

    trial_context_class = EstimatorTrialContext

    def __init__(self, context: EstimatorTrialContext) -> None:
        self.context = context

    @abc.abstractmethod
    def build_estimator(self) -> tf.estimator.Estimator:
        """The Estimator to train: a premade one or ``tf.estimator.Estimator(model_fn=...)``."""

    @abc.abstractmethod
    def build_train_spec(self) -> tf.estimator.TrainSpec:
        """The TrainSpec; its ``input_fn`` must return a ``tf.data.Dataset`` of batches."""

    @abc.abstractmethod
    def build_validation_spec(self) -> tf.estimator.EvalSpec:
        """The EvalSpec: ``steps`` batches, or until the input ends when ``steps`` is None."""

    def build_serving_input_receiver_fns(self) -> dict[str, ServingInputReceiverFn]:
        """Serving input receiver functions by name; each checkpoint holds one SavedModel export
        per entry under ``<name>/<timestamp>/``. None by default."""
        return {}
