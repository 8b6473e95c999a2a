"""TFKerasTrial and TFKerasTrialContext: the legacy Trial API for Keras (deprecated upstream in 0.38).

A thin layer over :class:`~determined.keras.DeterminedCallback`: the runner builds the trial, calls
``build_model()`` and the data-loader builders, and runs one ``model.fit()`` with the callback and
the trial's ``keras_callbacks()``. Unlike upstream there is no workload loop driven from inside Keras
callbacks and no proxy subclass of the model: ``wrap_model`` and ``wrap_optimizer`` return the very
objects they are given (they only record them), and data is whatever ``fit()`` accepts.
"""

from __future__ import annotations

import abc
import logging
import pathlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from determined import ClusterInfo, core

logger = logging.getLogger("determined.keras")

InputData = Any
"""What a data-loader builder returns: anything ``model.fit()`` takes as ``x`` — a
``tf.data.Dataset``, a ``keras.utils.PyDataset``/``Sequence`` (bare or in a
:class:`~determined.keras.SequenceAdapter`), or a tuple ``(x, y[, sample_weight])`` of arrays
(batched by the runner with the global batch size)."""

_NOT_GIVEN: Any = object()
"""configure_fit's default where ``None`` is a meaningful value (class_weight, validation_steps)."""


class TFKerasTrialContext:
    """What a TFKerasTrial sees of its trial: hyperparameters, config, batch sizes, the Core API.

    Args:
        core_context: the trial's Core API context.
        cluster_info: the trial's ClusterInfo.
        strategy: the ``tf.distribute`` strategy the model is built under (``None`` without one).
    """

    def __init__(
        self, core_context: core.Context, cluster_info: ClusterInfo, strategy: Any = None
    ) -> None:
        self._core = core_context
        self._info = cluster_info
        self._trial = cluster_info.trial
        self._hparams = dict(self._trial.hparams)
        self._config = dict(self._trial.config)
        self.distributed = core_context.distributed
        self.strategy = strategy
        self.model: Any = None
        self.optimizers: list[Any] = []
        self.fit_args: dict[str, Any] = {}
        self._stop_requested = False
        # The runner sets it from the checkpoint it resumes from, before the trial is built.
        self._initial_batch = int(self._trial.steps_completed)

    # -- the Core API and the trial --------------------------------------------------------------

    def get_core_context(self) -> core.Context:
        """The Core API context (metrics, checkpoints, preemption)."""
        return self._core

    def get_hparams(self) -> dict[str, Any]:
        return dict(self._hparams)

    def get_hparam(self, name: str) -> Any:
        """One hyperparameter; KeyError naming the known ones if it does not exist."""
        if name not in self._hparams:
            raise KeyError(
                f"hyperparameter {name!r} is not defined; this trial has: "
                f"{', '.join(sorted(self._hparams)) or 'none'}"
            )
        return self._hparams[name]

    def get_experiment_config(self) -> dict[str, Any]:
        return dict(self._config)

    def get_data_config(self) -> dict[str, Any]:
        return dict(self._config.get("data") or {})

    def get_experiment_id(self) -> int:
        return int(self._trial.experiment_id)

    def get_trial_id(self) -> int:
        return int(self._trial.trial_id)

    def get_trial_seed(self) -> int:
        return int(self._trial.trial_seed)

    def get_global_batch_size(self) -> int:
        """The ``global_batch_size`` hyperparameter (required by this API)."""
        if "global_batch_size" not in self._hparams:
            raise ValueError(
                "hyperparameters.global_batch_size: TFKerasTrial needs it (the batch size of all "
                "workers together)"
            )
        value = self._hparams["global_batch_size"]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(
                f"hyperparameters.global_batch_size: must be a positive integer, got {value!r}"
            )
        return value

    def get_per_slot_batch_size(self) -> int:
        """The global batch size divided by the number of workers (what one worker trains on)."""
        size = self.distributed.size
        global_batch_size = self.get_global_batch_size()
        if global_batch_size < size:
            raise ValueError(
                f"hyperparameters.global_batch_size ({global_batch_size}) is smaller than the "
                f"number of workers ({size})"
            )
        return global_batch_size // size

    def get_tensorboard_path(self) -> pathlib.Path:
        return self._core.train.get_tensorboard_path()

    def get_initial_batch(self) -> int:
        """The batch this trial starts at: 0 for a fresh trial (or a warm start), the
        checkpoint's ``steps_completed`` when it resumes after a pause."""
        return self._initial_batch

    def set_stop_requested(self, stop_requested: bool) -> None:
        """Ask to end training early (after the current epoch)."""
        self._stop_requested = bool(stop_requested)

    def get_stop_requested(self) -> bool:
        return self._stop_requested

    # -- wrapping: recorded, returned unchanged ---------------------------------------------------

    def wrap_model(self, model: Any) -> Any:
        """Register the model to train; returns it unchanged (compile it yourself, as usual)."""
        self.model = model
        return model

    def wrap_optimizer(self, optimizer: Any) -> Any:
        """Register an optimizer; returns it unchanged (tf.distribute needs no wrapper)."""
        self.optimizers.append(optimizer)
        return optimizer

    def wrap_dataset(self, dataset: Any, shard_dataset: bool = True) -> Any:
        """Returns ``dataset``: ``fit()`` under a tf.distribute strategy shards it across workers."""
        return dataset

    def configure_fit(
        self,
        verbose: bool | int | None = None,
        class_weight: Any = _NOT_GIVEN,
        workers: int | None = None,
        use_multiprocessing: bool | None = None,
        max_queue_size: int | None = None,
        shuffle: bool | None = None,
        validation_steps: Any = _NOT_GIVEN,
    ) -> None:
        """Extra ``fit()`` arguments, as upstream: an argument left out (or ``None``) keeps what
        an earlier call set. On Keras 3, whose ``fit()`` has no workers, use_multiprocessing and
        max_queue_size, those three are set on the data's PyDataset."""
        given = {
            "verbose": verbose,
            "workers": workers,
            "use_multiprocessing": use_multiprocessing,
            "max_queue_size": max_queue_size,
            "shuffle": shuffle,
        }
        self.fit_args.update({name: value for name, value in given.items() if value is not None})
        for name, value in (("class_weight", class_weight), ("validation_steps", validation_steps)):
            if value is not _NOT_GIVEN:
                self.fit_args[name] = value


class TFKerasTrial(abc.ABC):
    """A Keras model trained by det: subclass it and name it in the entrypoint (``model_def:MyTrial``).

    Implement :meth:`build_model` (build, ``context.wrap_model``, compile), and the two data-loader
    builders. Training length comes from the searcher (``max_length: {epochs: N}``, ``{batches: N}``,
    ``{records: N}``, or ``time_metric``/``max_time`` in batches or epochs); validation runs every
    ``min_validation_period`` epochs (default 1), checkpoints every ``min_checkpoint_period`` epochs
    (default 1) and when the trial is paused or stopped.
    """

    trial_context_class = TFKerasTrialContext

    def __init__(self, context: TFKerasTrialContext) -> None:
        self.context = context

    @abc.abstractmethod
    def build_model(self) -> Any:
        """Return the compiled model (built under the trial's strategy)."""

    @abc.abstractmethod
    def build_training_data_loader(self) -> InputData:
        """Return the training data (see :data:`InputData`)."""

    @abc.abstractmethod
    def build_validation_data_loader(self) -> InputData:
        """Return the validation data (see :data:`InputData`)."""

    def session_config(self) -> Any:
        """TensorFlow 1 session options; ignored (TensorFlow 2 has no sessions)."""
        return None

    def keras_callbacks(self) -> list[Any]:
        """More Keras callbacks for ``fit()`` (not BackupAndRestore or ModelCheckpoint)."""
        return []
