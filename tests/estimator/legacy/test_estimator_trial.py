"""EstimatorTrial off-cluster (``det.experimental.create(..., mode=Mode.LOCAL)``) in the legacy venv:
examples/estimator trains, validates, checkpoints with serving exports, resumes bit-exactly, honours
RunHooks, make_metric and stop requests, and refuses bad definitions with errors naming them."""

from __future__ import annotations

import json
import logging
import pathlib
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import tensorflow as tf
import yaml

import determined as det
from determined import estimator
from determined.core import _hooks

EXAMPLE = pathlib.Path(__file__).resolve().parents[3] / "examples" / "estimator"
sys.path.insert(0, str(EXAMPLE))
from model_def import CancerTrial  # noqa: E402

Mode = det.experimental.Mode


class Reports(logging.Handler):
    """Collects the metrics the local backend logs: ``(group, steps_completed, metrics)``."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.reports: list[tuple[str, int, dict[str, Any]]] = []
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())
        if record.msg == "%s metrics at step %s: %s" and isinstance(record.args, tuple):
            group, step, metrics = record.args
            self.reports.append((str(group), int(step), dict(metrics)))  # type: ignore[call-overload]

    def steps(self, group: str) -> list[int]:
        return [step for g, step, _ in self.reports if g == group]

    def at(self, group: str, step: int) -> dict[str, Any]:
        return next(m for g, s, m in self.reports if g == group and s == step)


@pytest.fixture
def reports() -> Iterator[Reports]:
    handler = Reports()
    logger = logging.getLogger("determined")
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)


def _config(storage: pathlib.Path, batches: int, **overrides: Any) -> dict[str, Any]:
    config = yaml.safe_load((EXAMPLE / "const.yaml").read_text())
    config.pop("environment")
    config["searcher"]["max_length"] = {"batches": batches}
    config["checkpoint_storage"] = {"type": "shared_fs", "host_path": str(storage)}
    config["reproducibility"] = {"experiment_seed": 3}
    config.update(overrides)
    return config


def _checkpoints(storage: pathlib.Path) -> list[tuple[int, pathlib.Path]]:
    """``(steps_completed, directory)`` of every checkpoint in ``storage``, oldest first."""
    found = []
    for metadata in storage.glob("*/metadata.json"):
        step = json.loads(metadata.read_text())["steps_completed"]
        found.append((metadata.stat().st_mtime, step, metadata.parent))
    return [(step, path) for _, step, path in sorted(found)]


def _weights(checkpoint: pathlib.Path) -> dict[str, np.ndarray]:
    reader = tf.train.load_checkpoint(str(checkpoint))
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def test_trains_validates_checkpoints_and_resumes_exactly(
    tmp_path: pathlib.Path, reports: Reports
) -> None:
    periods = {
        "scheduling_unit": 10,
        "min_validation_period": {"batches": 20},
        "min_checkpoint_period": {"batches": 20},
        "checkpoint_policy": "none",
    }
    config = _config(tmp_path / "ckpt", 40, **periods)
    det.experimental.create(CancerTrial, config, mode=Mode.LOCAL, context_dir=EXAMPLE)
    assert reports.steps("training") == [10, 20, 30, 40]
    assert reports.steps("validation") == [20, 40]
    final = reports.at("validation", 40)
    assert final["batches"] == 40 and 0.5 < final["accuracy"] <= 1.0, final
    checkpoints = dict(_checkpoints(tmp_path / "ckpt"))
    assert sorted(checkpoints) == [20, 40]
    metadata = json.loads((checkpoints[40] / "metadata.json").read_text())
    assert metadata["format"] == "saved_model" and metadata["framework"].startswith("tensorflow")

    # The serving export of the checkpoint loads and classifies.
    served = estimator.load_estimator_from_checkpoint_path(str(checkpoints[40]))
    features = tf.constant(np.zeros((2, 30), dtype="float32"))
    classes = served.signatures["serving_default"](x=features)["class"]
    assert classes.shape == (2,)

    # Resume from batch 20: the same training and validation metrics, the same final weights.
    training_at_40 = reports.at("training", 40)
    reports.reports.clear()
    det.experimental.create(
        CancerTrial,
        config,
        mode=Mode.LOCAL,
        context_dir=EXAMPLE,
        latest_checkpoint=checkpoints[20].name,
    )
    assert any("resuming from checkpoint" in m for m in reports.messages)
    assert reports.steps("training") == [30, 40]
    assert reports.steps("validation") == [40]
    assert reports.at("validation", 40) == final
    assert reports.at("training", 40) == training_at_40
    step, resumed = _checkpoints(tmp_path / "ckpt")[-1]
    assert step == 40 and resumed != checkpoints[40]
    before, after = _weights(checkpoints[40]), _weights(resumed)
    assert sorted(before) == sorted(after)
    assert all(np.array_equal(before[name], after[name]) for name in before)


class HookedTrial(CancerTrial):
    """The example with a RunHook, a stop request at batch 15 and two make_metric metrics."""

    events: list[str] = []

    def _model_fn(self, features: Any, labels: Any, mode: str) -> tf.estimator.EstimatorSpec:
        spec = super()._model_fn(features, labels, mode)
        if mode != tf.estimator.ModeKeys.EVAL:
            return spec

        class Mean(estimator.MetricReducer):
            def __init__(self) -> None:
                self.total, self.count = 0.0, 0

            def accumulate(self, metric: Any) -> Any:
                self.total += float(np.sum(metric))
                self.count += len(metric)
                return self.total, self.count

            def cross_slot_reduce(self, per_slot_metrics: list[Any]) -> Any:
                totals, counts = zip(*per_slot_metrics, strict=True)
                return sum(totals) / sum(counts)

        label_mean = self.context.make_metric(
            labels, lambda batches: np.mean(np.concatenate(batches)), np.float32
        )
        label_mean_reduced = self.context.make_metric(labels, Mean(), np.float32)
        ops = {**spec.eval_metric_ops, "label_mean": label_mean, "reduced": label_mean_reduced}
        return spec._replace(eval_metric_ops=ops)

    def build_train_spec(self) -> tf.estimator.TrainSpec:
        events = self.events
        context = self.context

        class Recorder(estimator.RunHook):
            def on_checkpoint_load(self, checkpoint_dir: str) -> None:
                events.append("load")

            def on_checkpoint_end(self, checkpoint_dir: str) -> None:
                pathlib.Path(checkpoint_dir, "hook.txt").write_text("written by the hook")
                events.append("checkpoint")

            def on_trial_close(self) -> None:
                events.append("close")

        class StopAt15(tf.estimator.SessionRunHook):
            def before_run(self, run_context: Any) -> Any:
                return tf.estimator.SessionRunArgs(tf.compat.v1.train.get_global_step())

            def after_run(self, run_context: Any, run_values: Any) -> None:
                if run_values.results == 15:
                    context.set_stop_requested(True)

        spec = super().build_train_spec()
        return tf.estimator.TrainSpec(spec.input_fn, hooks=[Recorder(), StopAt15()])


def test_run_hooks_make_metric_and_a_stop_request(tmp_path: pathlib.Path, reports: Reports) -> None:
    config = _config(
        tmp_path,
        40,
        scheduling_unit=5,
        min_validation_period={"batches": 10},
        checkpoint_policy="none",
    )
    HookedTrial.events = []
    det.experimental.create(HookedTrial, config, mode=Mode.LOCAL)
    validation = reports.at("validation", 10)
    expected = float(np.mean(_labels()))
    assert validation["label_mean"] == pytest.approx(expected)
    assert validation["reduced"] == pytest.approx(expected)
    assert reports.steps("training") == [5, 10, 15]
    assert any("EXITED_REASON_USER_REQUESTED_STOP" in m for m in reports.messages)
    ((step, checkpoint),) = _checkpoints(tmp_path)
    assert step == 15
    assert (checkpoint / "hook.txt").read_text() == "written by the hook"
    assert HookedTrial.events == ["checkpoint", "close"]


def _labels() -> np.ndarray:
    from model_def import load_data

    return load_data()[1][1]


def test_test_mode_trains_one_batch_then_validates_and_checkpoints(
    tmp_path: pathlib.Path, reports: Reports
) -> None:
    det.experimental.create(CancerTrial, _config(tmp_path, 300), mode=Mode.LOCAL, test=True)
    assert reports.steps("training") == [1]
    assert reports.steps("validation") == [1]
    assert [step for step, _ in _checkpoints(tmp_path)] == [1]


def _info(config: dict[str, Any], slot_ids: list[int] | None = None) -> det.ClusterInfo:
    return det.ClusterInfo(
        master_url="http://127.0.0.1:1",
        cluster_id="test",
        agent_id="local",
        slot_ids=slot_ids or [],
        task_id="t",
        allocation_id="a",
        session_token="",
        task_type="TRIAL",
        trial_info=det.TrialInfo(1, 1, 7, {"global_batch_size": 32, "hidden": 4,
                                          "learning_rate": 0.1}, config, 0, 1, False, None),
    )  # fmt: skip


class WrongSpecTrial(CancerTrial):
    def build_train_spec(self) -> Any:
        return {"input_fn": None}


def test_bad_definitions_fail_with_errors_naming_them(tmp_path: pathlib.Path) -> None:
    runner = _hooks.trial_runner(CancerTrial)  # found through the plugin's entry point
    assert isinstance(runner, estimator.EstimatorTrialRunner)
    config = _config(tmp_path, 10)
    with pytest.raises(TypeError, match="build_train_spec: must return a tf.estimator.TrainSpec"):
        runner.run(WrongSpecTrial, _info(config))
    no_length = {**config, "searcher": {"name": "single", "metric": "accuracy"}}
    with pytest.raises(ValueError, match="searcher.max_length"):
        runner.run(CancerTrial, _info(no_length))
    with pytest.raises(ValueError, match="slots_per_trial"):
        runner.run(CancerTrial, _info(config, slot_ids=[0, 1]))
    with pytest.raises(ValueError, match="runs as a trial of an experiment"):
        runner.run(CancerTrial, None)
    wrong_metric = {**config, "searcher": {**config["searcher"], "metric": "auc"}}
    with pytest.raises(ValueError, match="searcher.metric: 'auc' is not among"):
        runner.run(CancerTrial, _info(wrong_metric))
