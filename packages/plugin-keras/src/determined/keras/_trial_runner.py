"""TFKerasTrialRunner: trains a TFKerasTrial inside a trial process (the ``det_trial_runner`` hook).

Multi-slot trials run under ``python -m determined.launch.tensorflow`` (one worker per CPU slot, or
one process for all GPUs), which sets ``TF_CONFIG``; the runner builds the DistributedContext and the
strategy from it with ``DistributedContext.from_tf_config()``.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
from typing import TYPE_CHECKING, Any

import determined as det

if TYPE_CHECKING:
    from determined import ClusterInfo
    from determined.keras._trial import TFKerasTrial, TFKerasTrialContext

logger = logging.getLogger("determined.keras")


def _period_epochs(config: dict[str, Any], name: str, default: int) -> int:
    """``min_validation_period``/``min_checkpoint_period`` in epochs (``{epochs: N}``; else default)."""
    value = config.get(name)
    if isinstance(value, dict) and "epochs" in value:
        epochs = value["epochs"]
        if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 1:
            raise ValueError(f"{name}.epochs: must be a positive integer, got {epochs!r}")
        return epochs
    if value:
        logger.warning("%s: only {epochs: N} is used by TFKerasTrial; got %r", name, value)
    return default


def _training_length(config: dict[str, Any]) -> tuple[int, str]:
    """(length, unit) from the searcher config; unit is epochs, batches or records."""
    searcher = dict(config.get("searcher") or {})
    max_length = searcher.get("max_length")
    if isinstance(max_length, dict) and len(max_length) == 1:
        ((unit, value),) = max_length.items()
    elif isinstance(max_length, int) and not isinstance(max_length, bool):
        unit, value = "batches", max_length
    elif searcher.get("max_time") is not None:
        unit, value = str(searcher.get("time_metric") or "batches"), searcher["max_time"]
    else:
        raise ValueError(
            "searcher.max_length: TFKerasTrial needs a training length "
            "({epochs: N}, {batches: N} or {records: N}, or time_metric + max_time)"
        )
    if unit not in ("epochs", "batches", "records"):
        raise ValueError(
            f"searcher: TFKerasTrial counts training in epochs, batches or records, not {unit!r}"
        )
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"searcher.max_length: must be a positive integer, got {value!r}")
    return value, unit


def _batches_per_epoch(data: Any, batch_size: int) -> int | None:
    """How many batches one pass over ``data`` has, when it can be known."""
    if isinstance(data, tuple) and data:
        return math.ceil(len(data[0]) / batch_size)
    try:
        return len(data)
    except TypeError:
        pass
    cardinality = getattr(data, "cardinality", None)
    if cardinality is not None:
        count = int(cardinality())
        return count if count >= 0 else None
    return None


def _initial_batch(core_context: det.core.Context, info: ClusterInfo) -> int:
    """The batch count the trial resumes at: its checkpoint's, if it continues this trial (a
    warm start from another trial's checkpoint starts at 0); else what the master says."""
    from determined.keras._callback_files import STATE_FILE, read_state

    checkpoint = info.latest_checkpoint
    if not checkpoint:
        return int(info.trial.steps_completed)
    with core_context.checkpoint.restore_path(
        checkpoint, selector=lambda path: path == STATE_FILE
    ) as path:
        state = read_state(path)
    if not state:
        return int(info.trial.steps_completed)
    return int(state["steps_completed"]) if state.get("continue_id") == info.trial.trial_id else 0


class TFKerasTrialRunner:
    """Runs a TFKerasTrial: builds it, then one ``model.fit()`` with a DeterminedCallback."""

    launcher: str | None = "determined.launch.tensorflow"

    def run(self, trial_class: type, cluster_info: ClusterInfo | None) -> None:
        if cluster_info is None or cluster_info.task_type != "TRIAL":
            raise ValueError(
                f"{trial_class.__name__}: a TFKerasTrial runs as a trial of an experiment "
                "(det experiment create); off-cluster, use model.fit() with "
                "det.keras.DeterminedCallback"
            )
        config = dict(cluster_info.trial.config)
        length, unit = _training_length(config)  # fail fast, before TensorFlow loads
        if os.environ.get("TF_CONFIG"):
            distributed, strategy = det.core.DistributedContext.from_tf_config()
        else:
            distributed, strategy = det.core.DistributedContext(), None
        with det.core.init(distributed=distributed) as core_context:
            try:
                self._train(trial_class, cluster_info, core_context, strategy, length, unit)
            finally:
                distributed.close()

    def _train(
        self,
        trial_class: type[TFKerasTrial],
        info: ClusterInfo,
        core_context: det.core.Context,
        strategy: Any,
        length: int,
        unit: str,
    ) -> None:
        from determined.keras import _data
        from determined.keras._compat import keras
        from determined.keras._trial import TFKerasTrialContext
        from determined.keras._trial_callbacks import TrialCallbacks

        context_class = getattr(trial_class, "trial_context_class", TFKerasTrialContext)
        context: TFKerasTrialContext = context_class(core_context, info, strategy)
        context._initial_batch = _initial_batch(core_context, info)
        config = context.get_experiment_config()
        keras.utils.set_random_seed(context.get_trial_seed() % (2**31))
        scope = strategy.scope() if strategy is not None else contextlib.nullcontext()
        with scope:
            trial = trial_class(context)
            model = trial.build_model()
        if getattr(model, "optimizer", None) is None:
            raise ValueError(
                f"{trial_class.__name__}.build_model: return a compiled model (model.compile(...))"
            )
        train_data, loader_args = _data.unwrap(trial.build_training_data_loader())
        # A validation SequenceAdapter's own settings are ignored, as upstream did.
        validation_data, _ = _data.unwrap(trial.build_validation_data_loader())
        batch_size = context.get_global_batch_size()

        epochs = length
        if unit != "epochs":
            batches = length if unit == "batches" else math.ceil(length / batch_size)
            per_epoch = _batches_per_epoch(train_data, batch_size)
            if not per_epoch:
                raise ValueError(
                    "searcher.max_length: the training data's length is unknown, so a length in "
                    f"{unit} cannot become epochs; use {{epochs: N}}"
                )
            epochs = math.ceil(batches / per_epoch)
            if batches % per_epoch:
                logger.info(
                    "training for %d epochs of %d batches (%d batches; the searcher asked for %d)",
                    epochs,
                    per_epoch,
                    epochs * per_epoch,
                    batches,
                )

        trial_callbacks = TrialCallbacks(
            core_context,
            checkpoint=info.latest_checkpoint,
            continue_id=info.trial.trial_id,
            train_metrics_report_period=int(config.get("scheduling_unit") or 100),
            checkpoint_epochs=_period_epochs(config, "min_checkpoint_period", 1),
            context=context,
            trial=trial,
            callbacks=list(trial.keras_callbacks()),
            copy_code=det.get_cluster_info() is not None,  # on a master, not Mode.LOCAL
        )
        fit_args: dict[str, Any] = _data.apply_loader_args(
            {"verbose": 0, **context.fit_args}, loader_args, [train_data, validation_data]
        )
        if isinstance(train_data, tuple):
            x, y, *rest = train_data
            fit_args.update(x=x, y=y, batch_size=batch_size)
            if rest:
                fit_args["sample_weight"] = rest[0]
        else:
            fit_args["x"] = train_data
        model.fit(
            epochs=epochs,
            validation_data=validation_data,
            validation_freq=_period_epochs(config, "min_validation_period", 1),
            callbacks=[trial_callbacks],
            **fit_args,
        )
        if context.get_stop_requested() and core_context.distributed.rank == 0:
            core_context.train.report_early_exit(det.core.EarlyExitReason.USER_REQUESTED_STOP)
