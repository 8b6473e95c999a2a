"""DetCallback: connects a Hugging Face ``Trainer`` to det (Determined 0.38.1's callback).

The Trainer keeps doing the work: it logs, evaluates and writes ``checkpoint-N`` directories under
``args.output_dir``. The callback turns each log into det metrics (steps are the Trainer's
``global_step``, i.e. batches, and every report carries ``batches`` and ``epochs`` for a searcher's
``time_metric``), stores each saved ``checkpoint-N`` as a det checkpoint, reports progress, stops
training with a final checkpoint when preempted, and points ``args.resume_from_checkpoint`` at the
trial's latest checkpoint.

Differences from upstream's callback (fixes, on purpose):

- It works off-cluster (``det.core.init()`` without a master): metrics are logged and checkpoints
  stored locally; upstream raised ``RuntimeError``.
- An ASHA searcher (``adaptive_asha``/``async_halving``) with ``time_metric: batches`` or ``epochs``
  no longer crashes the constructor (upstream appended to a ``required_metrics`` list it never
  created). On a det master the trial evaluates at each rung and hears the searcher's verdict at
  once (see ``_searcher_rungs``), so a stopped trial stops at the rung.
- A preemption noticed in an end-of-epoch evaluation still saves a checkpoint (upstream stopped
  without one there), and never twice for one step.
- The Trainer's ``logs`` dict and the caller's ``filter_metrics`` list are not modified (upstream
  removed ``epoch`` from the logs every later callback sees and appended to the caller's list).
- Resuming picks the ``checkpoint-N`` directory of the checkpoint the master named (its
  ``steps_completed``), not whichever is newest in ``output_dir``; ``overwrite_output_dir``, which
  transformers 5 removed, is honoured where it exists.
- An evaluation outside ``train()`` (``state.epoch`` is ``None``) reports no ``epochs`` metric
  rather than a ``None`` validation metric, which det refuses.
- With ``eval_strategy="no"`` no evaluation is forced at the end of training (upstream forced one,
  which fails without an evaluation dataset).
"""

from __future__ import annotations

import json
import logging
import os
from typing import TYPE_CHECKING, Any

import transformers
from transformers import trainer_utils

import determined as det
from determined.transformers._searcher_rungs import (
    ASHA_SEARCHERS,
    SearcherRungs,
    check_searcher_length,
)

if TYPE_CHECKING:
    from determined import core

logger = logging.getLogger("determined.transformers")

EVAL = "eval_"
TEST = "test_"
TRAIN = "train_"
USER_DATA_FILE = "my_data.json"
"""Where ``user_data`` is written inside every checkpoint (upstream's name)."""
_SPEED_SUFFIXES = ("_runtime", "_per_second", "_compilation_time")


def get_metric_type(logs: dict[str, Any]) -> str:
    """Which kind of Trainer log ``logs`` is: ``EVAL``, ``TEST`` or ``TRAIN`` (anything else)."""
    if any(key.startswith(EVAL) for key in logs):
        return EVAL
    if any(key.startswith(TEST) for key in logs):
        return TEST
    return TRAIN


def get_ds_config_path_from_args(args: list[str]) -> str | None:
    """The path after ``--deepspeed`` in a command line, or ``None``."""
    for index, arg in enumerate(args[:-1]):
        if arg == "--deepspeed":
            return args[index + 1]
    return None


def _evaluates(args: transformers.TrainingArguments) -> bool:
    """Whether the Trainer evaluates at all (with ``eval_strategy="no"`` it may have no eval set,
    and a forced evaluation would fail)."""
    strategy = getattr(args, "eval_strategy", None) or getattr(args, "evaluation_strategy", "no")
    return str(getattr(strategy, "value", strategy)) != "no"


class DetCallback(transformers.TrainerCallback):  # type: ignore[misc]
    """Reports a Hugging Face ``Trainer``'s metrics and checkpoints to det and resumes from them.

    Pass it in ``Trainer(callbacks=[...])`` and start training with
    ``trainer.train(resume_from_checkpoint=args.resume_from_checkpoint)``: on a det master, the
    constructor downloads the trial's latest checkpoint into ``args.output_dir`` and sets
    ``args.resume_from_checkpoint`` to its ``checkpoint-N`` directory.

    Args:
        core_context: the context of ``det.core.init()``.
        args: the ``TrainingArguments`` given to the ``Trainer``.
        filter_metrics: report only metrics whose name contains one of these strings (the
            searcher's ``metric`` and ``time_metric`` are always kept); ``None`` reports all.
        user_data: a JSON-serializable dict written into every checkpoint as ``my_data.json``.
    """

    def __init__(
        self,
        core_context: core.Context,
        args: transformers.TrainingArguments,
        filter_metrics: list[str] | None = None,
        user_data: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        self.core_context = core_context
        self.filter_metrics = list(filter_metrics) if filter_metrics else None
        self.user_data = user_data

        self.last_train_metrics = -1
        self.last_eval_metrics = -1
        self.last_save = -1
        self.last_progress = 0

        self.info = det.get_cluster_info()
        self.load_last_checkpoint(args)

        self.searcher_metric: str | None = None
        self.time_metric: str | None = None
        self._rungs: SearcherRungs | None = None
        if self.info is not None and self.info.task_type == "TRIAL":
            searcher_config = dict(self.info.trial.config.get("searcher") or {})
            unit = check_searcher_length(searcher_config, args.max_steps, args.num_train_epochs)
            self.searcher_metric = searcher_config.get("metric")
            self.time_metric = searcher_config.get("time_metric")
            if self.filter_metrics:
                # The searcher cannot work without these: never filter them out.
                self.filter_metrics.extend(m for m in (self.searcher_metric, self.time_metric) if m)
            if unit is not None and searcher_config.get("name") in ASHA_SEARCHERS:
                self._rungs = SearcherRungs(core_context.searcher, unit)

        # Upstream's switches for the evaluation and checkpoint forced at the end of training.
        self._force_final_save = True
        self._force_final_evaluate = True

    # -- resuming ----------------------------------------------------------------------------------

    def load_last_checkpoint(self, args: transformers.TrainingArguments) -> None:
        """Download the trial's latest checkpoint into ``args.output_dir`` and set
        ``args.resume_from_checkpoint`` to its ``checkpoint-N`` directory (on a det master only)."""
        latest_checkpoint = self.info.latest_checkpoint if self.info is not None else None
        if latest_checkpoint is None:
            return
        if getattr(args, "overwrite_output_dir", False) is True:
            logger.info("not downloading the latest checkpoint: overwrite_output_dir=True")
            return
        # Every rank downloads all of it: DeepSpeed needs every shard on every node.
        self.core_context.checkpoint.download(latest_checkpoint, args.output_dir)
        steps = self.core_context.checkpoint.get_metadata(latest_checkpoint).get("steps_completed")
        checkpoint_path = os.path.join(args.output_dir, f"checkpoint-{steps}")
        if steps is None or not os.path.isdir(checkpoint_path):
            checkpoint_path = trainer_utils.get_last_checkpoint(args.output_dir)  # type: ignore[no-untyped-call]
        args.resume_from_checkpoint = checkpoint_path
        logger.info(f"latest checkpoint {latest_checkpoint} downloaded to {checkpoint_path}")

    # -- metrics -----------------------------------------------------------------------------------

    def _get_metrics(self, logs: dict[str, Any]) -> tuple[dict[str, Any], str]:
        metric_type = get_metric_type(logs)
        filters = self.filter_metrics
        metrics = {
            name: value
            for name, value in logs.items()
            if not filters or any(wanted in name for wanted in filters)
        }
        metrics.pop("epoch", None)  # the Trainer's rounded epoch; "epochs" is exact
        for name in [m for m in metrics if m.endswith(_SPEED_SUFFIXES)]:
            del metrics[name]
        return metrics, metric_type

    def _check_eval_metrics(self, metrics: dict[str, Any]) -> None:
        missing_searcher = self.searcher_metric is not None and self.searcher_metric not in metrics
        missing_time = self.time_metric is not None and self.time_metric not in metrics
        if missing_searcher and missing_time:
            raise ValueError(
                f"the evaluation metrics lack both the searcher metric {self.searcher_metric!r} "
                f"(searcher.metric) and the time metric {self.time_metric!r} "
                "(searcher.time_metric); the hyperparameter search needs them"
            )
        if missing_searcher:
            raise ValueError(
                f"the evaluation metrics lack the searcher metric {self.searcher_metric!r} "
                "(searcher.metric; the Trainer prefixes evaluation metrics with 'eval_'); the "
                "search, checkpoint garbage collection and the best checkpoint need it"
            )
        if missing_time:
            raise ValueError(
                f"the evaluation metrics lack the time metric {self.time_metric!r} "
                "(searcher.time_metric); the hyperparameter search needs it"
            )

    def on_log(
        self,
        args: transformers.TrainingArguments,
        state: transformers.TrainerState,
        control: transformers.TrainerControl,
        logs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if logs is None:
            logger.warning("on_log called without logs")
            return
        metrics, metric_type = self._get_metrics(logs)
        metrics.setdefault("batches", state.global_step)
        if state.epoch is not None:
            metrics.setdefault("epochs", state.epoch)
        if metric_type == TRAIN:
            # The summary logged after training repeats the last step: report each step once.
            if self.last_train_metrics != state.global_step:
                self.last_train_metrics = state.global_step
                if state.is_world_process_zero:
                    self.core_context.train.report_metrics(
                        group="training", steps_completed=state.global_step, metrics=metrics
                    )
        elif metric_type == EVAL:
            # An evaluation after training can repeat the last one's step: report each step once.
            if self.last_eval_metrics != state.global_step:
                self.last_eval_metrics = state.global_step
                if state.is_world_process_zero:
                    self._check_eval_metrics(metrics)
                    self.core_context.train.report_metrics(
                        group="validation", steps_completed=state.global_step, metrics=metrics
                    )
                self._complete_rung(state, control, metrics)
        else:
            logger.warning(f"metrics not reported: {metric_type!r} metrics ({sorted(metrics)})")

        if self.core_context.preempt.should_preempt():
            # Stop, and checkpoint this step (once, whichever log of the step gets here first).
            control.should_training_stop = True
            if state.global_step > self.last_save:
                control.should_save = True

    def _complete_rung(
        self,
        state: transformers.TrainerState,
        control: transformers.TrainerControl,
        metrics: dict[str, Any],
    ) -> None:
        rungs = self._rungs
        if rungs is None:
            return
        position = state.global_step if rungs.unit == "batches" else state.epoch
        if not rungs.reached(position):
            return
        value = metrics.get(self.searcher_metric) if self.searcher_metric else None
        if not rungs.complete(value, is_chief=state.is_world_process_zero):
            if not control.should_training_stop:
                logger.info(
                    f"the searcher needs no more training from this trial: stopping at step "
                    f"{state.global_step}"
                )
            control.should_training_stop = True
            if state.global_step > self.last_save and self._force_final_save:
                control.should_save = True

    # -- checkpoints -------------------------------------------------------------------------------

    def on_save(
        self,
        args: transformers.TrainingArguments,
        state: transformers.TrainerState,
        control: transformers.TrainerControl,
        **kwargs: Any,
    ) -> None:
        self.last_save = state.global_step
        # Where the Trainer just wrote model, optimizer, scheduler, RNG and trainer state.
        local_path = os.path.join(args.output_dir, f"checkpoint-{state.global_step}")
        if state.is_world_process_zero and self.user_data is not None:
            self._on_save_user_data(local_path)

        metadata: dict[str, Any] = {"steps_completed": state.global_step}
        if self.info is not None and self.info.task_type == "TRIAL":
            metadata["trial_id"] = self.info.trial.trial_id

        prefixes = (f"checkpoint-{state.global_step}/", "runs/")

        def selector(path: str) -> bool:
            return path.startswith(prefixes)

        # Every rank takes part: each uploads what it wrote (DeepSpeed/FSDP shards).
        self.core_context.checkpoint.upload(
            args.output_dir, metadata=metadata, shard=True, selector=selector
        )

    def _on_save_user_data(self, save_path: str) -> None:
        """Write ``user_data`` into the checkpoint directory; det stores it with the rest."""
        with open(os.path.join(save_path, USER_DATA_FILE), "w") as f:
            json.dump(self.user_data, f)

    # -- progress, searcher lengths and the end of training ----------------------------------------

    def on_step_end(
        self,
        args: transformers.TrainingArguments,
        state: transformers.TrainerState,
        control: transformers.TrainerControl,
        **kwargs: Any,
    ) -> None:
        if state.is_world_process_zero and args.max_steps > -1:
            # Only whole-percent increases: at most 100 progress calls to the master per trial.
            progress = min(state.global_step / args.max_steps, 1.0)
            percent = int(progress * 100)
            if percent > self.last_progress:
                self.last_progress = percent
                self.core_context.train.report_progress(progress)
        rungs = self._rungs
        if (
            rungs is not None
            and rungs.unit == "batches"
            and rungs.reached(state.global_step)
            and state.global_step > self.last_eval_metrics
        ):
            control.should_evaluate = True  # the searcher judges the trial at this rung

    def on_epoch_end(
        self,
        args: transformers.TrainingArguments,
        state: transformers.TrainerState,
        control: transformers.TrainerControl,
        **kwargs: Any,
    ) -> None:
        epoch = state.epoch or 0.0
        if control.should_training_stop:
            is_end = True
        elif args.max_steps > -1:
            is_end = state.global_step >= args.max_steps
        else:
            is_end = epoch >= args.num_train_epochs

        preempted = self.core_context.preempt.should_preempt()
        if is_end:
            # The last chance to evaluate and save: do it unless this step already was.
            if (
                state.global_step > self.last_eval_metrics
                and self._force_final_evaluate
                and _evaluates(args)
                and not preempted
            ):
                control.should_evaluate = True
            if state.global_step > self.last_save and (self._force_final_save or preempted):
                control.should_save = True

        rungs = self._rungs
        if (
            rungs is not None
            and rungs.unit == "epochs"
            and rungs.reached(epoch)
            and state.global_step > self.last_eval_metrics
            and not preempted
        ):
            control.should_evaluate = True

        if state.is_world_process_zero and args.max_steps == -1:
            self.core_context.train.report_progress(min(epoch / args.num_train_epochs, 1.0))
