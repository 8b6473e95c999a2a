"""EstimatorTrialRunner: trains an EstimatorTrial inside a trial process (the ``det_trial_runner`` hook).

det owns the loop instead of blocking inside a hook the way upstream did: one ``Estimator.train()``
call covers the whole searcher length, and a last ``SessionRunHook`` (the way TensorFlow's own
``train_and_evaluate`` evaluates through checkpoint listeners) acts at absolute batch boundaries:

- every ``scheduling_unit`` batches (and at every other boundary) it reports the averaged scalar
  summaries (``loss`` included) as training metrics;
- at ``min_validation_period`` and at the end it saves the model and runs ``Estimator.evaluate``, whose
  results become the validation metrics (plus ``batches``);
- at ``min_checkpoint_period``, after validations (``checkpoint_policy``), at the end and when
  preempted it stores a det checkpoint (see ``_checkpoint``);
- every batch it checks preemption (pause, kill, a searcher's stop), so a stop costs one batch.

Resume is exact: the model directory comes back from the checkpoint, the training input is repeated
and skips the batches already trained (its shuffles are seeded by the trial seed through the graph), and
the Python and NumPy RNGs are restored. Stateful random ops inside the model (dropout) restart their
sequence in the new session, as in any TensorFlow 1 graph restored from a checkpoint.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
import math
import pathlib
import random
import shutil
import tempfile
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import tensorflow as tf

import determined as det
from determined.core import EarlyExitReason, Unit
from determined.core.plugins import parse_max_length

if TYPE_CHECKING:
    from determined import ClusterInfo
    from determined.estimator._trial import EstimatorTrial, EstimatorTrialContext

logger = logging.getLogger("determined.estimator")


def _positive_int(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{field}: must be a positive integer, got {value!r}")
    return value


@dataclasses.dataclass(frozen=True)
class Plan:
    """Lengths in batches, from the experiment config's legacy fields.

    Attributes:
        length: batches to train in all (the searcher's ``max_length`` or ``max_time``).
        report_period: training metrics are reported every this many batches (``scheduling_unit``).
        validation_period: ``min_validation_period`` in batches (0: only at the end).
        checkpoint_period: ``min_checkpoint_period`` in batches (0: only at the end and when stopped).
        checkpoint_policy: ``best``, ``all`` or ``none`` (checkpoints after validations).
    """

    length: int
    report_period: int
    validation_period: int
    checkpoint_period: int
    checkpoint_policy: str

    @classmethod
    def from_config(cls, config: dict[str, Any], hparams: dict[str, Any]) -> Plan:
        """Read and check the config; ValueError naming the field on anything unusable."""
        global_batch_size = hparams.get("global_batch_size")
        records_per_epoch = config.get("records_per_epoch")

        def batches(value: Any, unit: str, field: str) -> int:
            count = _positive_int(value, field)
            if unit == "batches":
                return count
            if not isinstance(global_batch_size, int) or isinstance(global_batch_size, bool):
                raise ValueError(
                    f"{field}: a length in {unit} needs an integer global_batch_size hyperparameter"
                )
            if unit == "records":
                return math.ceil(count / global_batch_size)
            if unit == "epochs":
                if not records_per_epoch:
                    raise ValueError(f"{field}: a length in epochs needs records_per_epoch")
                return math.ceil(count * int(records_per_epoch) / global_batch_size)
            raise ValueError(f"{field}: unit must be batches, records or epochs, not {unit!r}")

        def period(name: str) -> int:
            value = config.get(name)
            if value is None:
                return 0
            if isinstance(value, int) and not isinstance(value, bool):
                return batches(value, "batches", name) if value else 0
            if not isinstance(value, dict) or len(value) != 1:
                raise ValueError(f"{name}: expected one unit like {{batches: 100}}, got {value!r}")
            ((unit, count),) = value.items()
            return batches(count, str(unit), f"{name}.{unit}") if count else 0

        searcher = dict(config.get("searcher") or {})
        value, unit = parse_max_length(searcher)
        if not value:
            raise ValueError(
                "searcher.max_length: an EstimatorTrial needs a training length "
                "(max_length: {batches: N}, or time_metric: batches with max_time for ASHA)"
            )
        unit_name = (unit or Unit.BATCHES).name.lower()
        length = batches(value, unit_name, "searcher.max_length")
        policy = str(config.get("checkpoint_policy") or "best")
        if policy not in ("best", "all", "none"):
            raise ValueError(f"checkpoint_policy: must be best, all or none, not {policy!r}")
        return cls(
            length=length,
            report_period=_positive_int(config.get("scheduling_unit") or 100, "scheduling_unit"),
            validation_period=period("min_validation_period"),
            checkpoint_period=period("min_checkpoint_period"),
            checkpoint_policy=policy,
        )


def _slots(info: ClusterInfo) -> int:
    return sum(info.container_slot_counts) or max(len(info.slot_ids), 1)


class EstimatorTrialRunner:
    """Runs an EstimatorTrial on one slot: builds it, then trains, validates and checkpoints."""

    launcher: str | None = None

    def run(self, trial_class: type, cluster_info: ClusterInfo | None) -> None:
        if cluster_info is None or cluster_info.task_type != "TRIAL":
            raise ValueError(
                f"{trial_class.__name__}: an EstimatorTrial runs as a trial of an experiment "
                "(det experiment create), or locally with det.experimental.create(..., "
                "mode=det.experimental.Mode.LOCAL)"
            )
        if _slots(cluster_info) > 1:
            raise ValueError(
                "resources.slots_per_trial: det trains an EstimatorTrial on one slot (upstream "
                "used Horovod for more, which det does not ship); set slots_per_trial: 1"
            )
        config = dict(cluster_info.trial.config or {})
        plan = Plan.from_config(config, dict(cluster_info.trial.hparams or {}))
        # Off-cluster (a Native API local run) the trial's own checkpoint_storage applies.
        process_info = det.get_cluster_info()
        on_cluster = process_info is not None and process_info.task_type == "TRIAL"
        storage = None if on_cluster else config.get("checkpoint_storage")

        tf.compat.v1.disable_v2_behavior()
        seed = int(cluster_info.trial.trial_seed)
        random.seed(seed)
        np.random.seed(seed % (2**32))
        tf.compat.v1.set_random_seed(seed)
        with det.core.init(checkpoint_storage=storage or None) as core_context:
            if core_context.distributed.size > 1:
                raise ValueError(
                    "EstimatorTrial: det trains it in one process, not under a launcher"
                )
            _Training(trial_class, cluster_info, core_context, plan).run()


def _train_input_fn(input_fn: Callable[..., Any], skip: int, context: EstimatorTrialContext) -> Any:
    """``input_fn`` repeated forever, skipping the ``skip`` batches trained before a resume."""
    try:
        accepted = set(inspect.signature(input_fn).parameters)
    except (TypeError, ValueError):
        accepted = set()

    def wrapped(mode: Any = None, params: Any = None, config: Any = None) -> Any:
        offered = {"mode": mode, "params": params, "config": config}
        dataset = input_fn(**{k: v for k, v in offered.items() if k in accepted})
        if not isinstance(dataset, tf.data.Dataset):
            raise TypeError(
                "build_train_spec: TrainSpec.input_fn must return a tf.data.Dataset of batches, "
                f"not {type(dataset).__name__}"
            )
        if not context.dataset_initialized:
            logger.warning("call context.wrap_dataset(dataset) on the datasets you build (upstream "
                           "required it for multi-slot training)")  # fmt: skip
        dataset = dataset.repeat()
        return dataset.skip(skip) if skip else dataset

    return wrapped


def _scalar(value: Any) -> Any:
    """A JSON-ready metric value: numbers as Python numbers, anything else as it comes."""
    if isinstance(value, np.ndarray) and value.size == 1:
        value = value.reshape(()).item()
    elif isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bytes):
        value = value.decode(errors="replace")
    return value


class _Training:
    """One run of an EstimatorTrial in this process."""

    def __init__(
        self,
        trial_class: type[EstimatorTrial],
        info: ClusterInfo,
        core_context: det.core.Context,
        plan: Plan,
    ) -> None:
        from determined.estimator._trial import EstimatorTrialContext

        self.info = info
        self.core = core_context
        self.plan = plan
        context_class = getattr(trial_class, "trial_context_class", EstimatorTrialContext)
        self.context: EstimatorTrialContext = context_class(core_context, info)
        self.trial = trial_class(self.context)
        self.model_dir = pathlib.Path(tempfile.mkdtemp(prefix="det-estimator-"))
        self.config = dict(info.trial.config or {})
        searcher = dict(self.config.get("searcher") or {})
        self.searcher_metric = searcher.get("metric")
        self.smaller_is_better = bool(searcher.get("smaller_is_better", True))
        self.session: Any = None
        self.saver: Any = None
        self.saved_step = -1
        self.validated_step = -1
        self.checkpointed_step = -1
        self.training_values: list[dict[str, float]] = []
        self.preempted = False
        self.run_hooks: list[Any] = []

    # ---- set-up -----------------------------------------------------------------------------------
    def _build(self) -> None:
        user_estimator = self.trial.build_estimator()
        if not isinstance(user_estimator, tf.estimator.Estimator):
            raise TypeError(
                "build_estimator: must return a tf.estimator.Estimator, "
                f"not {type(user_estimator).__name__}"
            )
        train_spec = self.trial.build_train_spec()
        if not isinstance(train_spec, tf.estimator.TrainSpec):
            raise TypeError(
                f"build_train_spec: must return a tf.estimator.TrainSpec, not {type(train_spec).__name__}"
            )
        eval_spec = self.trial.build_validation_spec()
        if not isinstance(eval_spec, tf.estimator.EvalSpec):
            raise TypeError(
                "build_validation_spec: must return a tf.estimator.EvalSpec, "
                f"not {type(eval_spec).__name__}"
            )
        serving_fns = self.trial.build_serving_input_receiver_fns() or {}
        if not isinstance(serving_fns, dict):
            raise TypeError("build_serving_input_receiver_fns: must return a dict of name -> fn")
        run_config = user_estimator.config
        if run_config.train_distribute is not None or run_config.eval_distribute is not None:
            raise ValueError(
                "build_estimator: RunConfig.train_distribute/eval_distribute must not be set; det "
                "decides how an EstimatorTrial is distributed"
            )
        # Rebuild the Estimator around det's model directory, seed and checkpointing (as upstream
        # did). Estimator has no public accessor for the raw model_fn or the warm-start settings.
        self.estimator = tf.estimator.Estimator(
            model_fn=user_estimator._model_fn,
            config=run_config.replace(
                model_dir=str(self.model_dir),
                tf_random_seed=self.info.trial.trial_seed,
                save_checkpoints_steps=None,
                save_checkpoints_secs=None,
            ),
            params=user_estimator.params or None,
            warm_start_from=getattr(user_estimator, "_warm_start_settings", None),
        )
        self.train_spec = train_spec
        self.eval_spec = eval_spec
        self.serving_fns = serving_fns
        self.run_hooks = [h for h in train_spec.hooks if self._is_run_hook(h)]

    @staticmethod
    def _is_run_hook(hook: Any) -> bool:
        from determined.estimator._trial import RunHook

        return isinstance(hook, RunHook)

    def _restore(self) -> int:
        """Fill the model directory from the latest checkpoint; the batches already trained."""
        from determined.estimator import _checkpoint

        uuid = self.info.latest_checkpoint
        if not uuid:
            return 0
        with self.core.checkpoint.restore_path(uuid) as path:
            step = _checkpoint.restore_model_dir(path, self.model_dir)
            state = _checkpoint.read_state(path)
            for hook in self.run_hooks:
                hook.on_checkpoint_load(str(path))
        if state is not None:
            _checkpoint.set_rng_state(state["rng"])
        logger.info("resuming from checkpoint %s at batch %d", uuid, step)
        self.saved_step = self.checkpointed_step = step
        return step

    # ---- the loop ---------------------------------------------------------------------------------
    def run(self) -> None:
        try:
            self._build()
            start = self._restore()
            if start < self.plan.length:
                hooks = [*self.train_spec.hooks, _ControlHook(self)]
                self.estimator.train(
                    input_fn=_train_input_fn(self.train_spec.input_fn, start, self.context),
                    hooks=hooks,
                    max_steps=self.plan.length,
                )
            step = self._current_step()
            self.session = None
            if self.preempted:
                return
            if self.context.get_stop_requested():
                self._checkpoint(step)
                self.core.train.report_early_exit(EarlyExitReason.USER_REQUESTED_STOP)
                return
            if step < self.plan.length:
                raise RuntimeError(
                    f"training stopped at batch {step} of {self.plan.length} without a stop request "
                    "(does TrainSpec.input_fn return an empty dataset?)"
                )
            if self.validated_step != step:
                self._validate(step)
            self._checkpoint(step)
        finally:
            for hook in self.run_hooks:
                hook.on_trial_close()
            tf.compat.v1.reset_default_graph()
            shutil.rmtree(self.model_dir, ignore_errors=True)

    def _current_step(self) -> int:
        from determined.estimator import _checkpoint

        prefix = _checkpoint.latest_checkpoint_prefix(self.model_dir)
        return int(prefix.name.rsplit("-", 1)[1]) if prefix else 0

    def after_batch(self, step: int, values: dict[str, float], run_context: Any) -> None:
        """Called by the control hook after every training batch, with the session still open."""
        plan = self.plan
        self.training_values.append(values)
        if run_context.stop_requested:  # another hook asked TensorFlow to stop: end the trial
            self.context.set_stop_requested(True)
        if self.core.preempt.should_preempt():
            self.preempted = True
        end = step >= plan.length
        stopping = self.preempted or self.context.get_stop_requested()
        validate = end or bool(plan.validation_period and step % plan.validation_period == 0)
        checkpoint = end or bool(plan.checkpoint_period and step % plan.checkpoint_period == 0)
        if validate or checkpoint or stopping or step % plan.report_period == 0:
            self._report_training(step)
            self.core.train.report_progress(min(step / plan.length, 1.0))
        if validate and not stopping:
            best = self._validate(step)
            if plan.checkpoint_policy == "all" or (plan.checkpoint_policy == "best" and best):
                checkpoint = True
        if checkpoint or stopping:
            self._checkpoint(step)
        if end or stopping:
            run_context.request_stop()

    def _report_training(self, step: int) -> None:
        if not self.training_values:
            return
        sums: dict[str, float] = {}
        counts: dict[str, int] = {}
        for values in self.training_values:
            if "loss" not in values and "loss_1" in values:
                values = {**values, "loss": values["loss_1"]}
            for name, value in values.items():
                sums[name] = sums.get(name, 0.0) + value
                counts[name] = counts.get(name, 0) + 1
        self.training_values = []
        metrics = {name: sums[name] / counts[name] for name in sums}
        self.core.train.report_training_metrics(steps_completed=step, metrics=metrics)

    def _save(self, step: int) -> str:
        """Save the model into the model directory (when a session is open); its checkpoint prefix."""
        prefix = str(self.model_dir / f"model.ckpt-{step}")
        if self.session is not None and self.saved_step != step:
            self.saver.save(self.session, str(self.model_dir / "model.ckpt"), global_step=step)
            self.saved_step = step
        return prefix

    def _validate(self, step: int) -> bool:
        """Evaluate and report; whether the result is the experiment's best so far."""
        prefix = self._save(step)
        spec = self.eval_spec
        results = self.estimator.evaluate(
            input_fn=spec.input_fn,
            steps=spec.steps,
            hooks=spec.hooks,
            checkpoint_path=prefix,
            name=spec.name,
        )
        metrics = {name: _scalar(value) for name, value in results.items()}
        metrics.setdefault("batches", step)
        self.validated_step = step
        if self.searcher_metric and self.searcher_metric not in metrics:
            raise ValueError(
                f"searcher.metric: {self.searcher_metric!r} is not among the evaluation results "
                f"{sorted(metrics)}; add it to the EstimatorSpec's eval_metric_ops"
            )
        best_before = self.core.train.get_experiment_best_validation()
        self.core.train.report_validation_metrics(steps_completed=step, metrics=metrics)
        value = metrics.get(self.searcher_metric) if self.searcher_metric else None
        if not isinstance(value, int | float) or best_before is None:
            return True
        return value < best_before if self.smaller_is_better else value > best_before

    def _checkpoint(self, step: int) -> None:
        from determined.estimator import _checkpoint

        if self.checkpointed_step == step:
            return
        prefix = self._save(step)
        metadata = {
            "steps_completed": step,
            "framework": f"tensorflow-{tf.__version__}",
            "format": "saved_model",
        }
        with self.core.checkpoint.store_path(metadata) as (path, uuid):
            _checkpoint.copy_model_dir(self.model_dir, path)
            _checkpoint.export_serving_models(self.estimator, self.serving_fns, path, prefix)
            _checkpoint.write_state(path, step)
            for hook in self.run_hooks:
                hook.on_checkpoint_end(str(path))
        logger.info("checkpoint %s at batch %d", uuid, step)
        self.checkpointed_step = step


class _ControlHook(tf.estimator.SessionRunHook):  # type: ignore[misc]
    """The last training hook: collects scalar summaries and hands every batch to ``_Training``."""

    def __init__(self, training: _Training) -> None:
        self.training = training

    def begin(self) -> None:
        v1 = tf.compat.v1
        scalars = [
            s
            for s in v1.get_collection(v1.GraphKeys.SUMMARIES)
            if s.op.type in ("ScalarSummary", "TensorSummary")
        ]
        self.summary = v1.summary.merge(scalars) if scalars else None
        self.global_step = v1.train.get_global_step()
        if self.global_step is None:
            raise ValueError("build_estimator: the model_fn's graph has no global step")

    def after_create_session(self, session: tf.compat.v1.Session, coord: Any) -> None:
        savers = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.SAVERS)
        if len(savers) != 1:
            raise RuntimeError(
                f"EstimatorTrial: expected one saver in the graph's SAVERS collection, found "
                f"{len(savers)} (a Scaffold with its own saver is not supported)"
            )
        self.training.saver = savers[0]

    def before_run(self, run_context: Any) -> Any:
        fetches: dict[str, Any] = {"step": self.global_step}
        if self.summary is not None:
            fetches["summary"] = self.summary
        return tf.estimator.SessionRunArgs(fetches)

    def after_run(self, run_context: Any, run_values: Any) -> None:
        results = run_values.results
        values: dict[str, float] = {}
        if "summary" in results:
            summary = tf.compat.v1.summary.Summary()
            summary.ParseFromString(results["summary"])
            for entry in summary.value:
                if entry.HasField("simple_value"):
                    values[entry.tag] = float(entry.simple_value)
                elif entry.HasField("tensor"):
                    array = tf.make_ndarray(entry.tensor)
                    if array.size == 1 and np.issubdtype(array.dtype, np.number):
                        values[entry.tag] = float(array.reshape(()))
        self.training.session = run_context.session
        self.training.after_batch(int(results["step"]), values, run_context)
