"""determined.pytorch.extension: what a framework plugin builds on, used the way a plugin uses it."""

from __future__ import annotations

import pathlib
from typing import Any

import onevar
import pytest
import torch

from determined import core, pytorch
from determined.pytorch import extension


def test_exports_are_public_and_resolve() -> None:
    for name in extension.__all__:
        assert not name.startswith("_")
        assert getattr(extension, name) is not None
    # every step the module docstring says a plugin overrides is a method of the base controller
    for step in (
        "check_trial",
        "evaluation_mode",
        "build_data_loaders",
        "train_until_boundary",
        "evaluate_batches",
        "evaluate_full_dataset",
        "read_checkpoint",
        "apply_checkpoint",
        "save_checkpoint",
    ):
        assert callable(getattr(extension.PyTorchTrialController, step)), step
        assert f"``{step}(" in (extension.__doc__ or ""), step


def test_validation_collector_checks_and_weighs_batches(off_cluster: pathlib.Path) -> None:
    dist = core.DistributedContext()
    ended: list[list[dict[str, Any]]] = []

    class Ends(pytorch.PyTorchCallback):
        def on_validation_epoch_end(self, outputs: list[dict[str, Any]]) -> None:
            ended.append(outputs)

    collector = extension.ValidationCollector(dist, {"ends": Ends()})
    loss = torch.tensor(2.0, requires_grad=True) * 1.0
    collector.add({"loss": loss}, 4)
    collector.add({"loss": 5.0}, 2)
    with pytest.raises(ValueError, match="same metric names"):
        collector.check({"acc": 1.0})
    with pytest.raises(TypeError, match="dict of metrics"):
        collector.check(1.0)
    assert not collector.outputs[0]["loss"].requires_grad
    metrics = collector.finish(pytorch.Reducer.AVG)
    assert metrics == {"loss": pytest.approx((2.0 * 4 + 5.0 * 2) / 6)}
    assert len(ended) == 1 and len(ended[0]) == 2
    with pytest.raises(RuntimeError, match="validation data is empty"):
        extension.ValidationCollector(dist, {}).finish(pytorch.Reducer.AVG)


def test_trial_environment_off_cluster(off_cluster: pathlib.Path) -> None:
    env = extension.TrialEnvironment.read({"lr": 0.1}, {"reproducibility": {"experiment_seed": 7}})
    assert env.local and env.cluster_info is None
    assert env.trial_seed == 7 and env.hparams == {"lr": 0.1} and env.steps_completed == 0
    assert extension.TrialEnvironment.read().trial_seed is None


class _CountingController(extension.PyTorchTrialController):
    """A framework plugin's controller in miniature: it overrides two steps and reuses the rest."""

    evaluated = 0
    saved: list[pathlib.Path] = []

    def evaluate_batches(self) -> dict[str, Any] | None:
        type(self).evaluated += 1
        return super().evaluate_batches()

    def write_checkpoint(self, path: pathlib.Path, rank_rng: list[dict[str, Any]]) -> None:
        super().write_checkpoint(path, rank_rng)
        type(self).saved.append(path)


class _CountingTrainer(pytorch.Trainer):
    def _make_controller(self, **kwargs: Any) -> _CountingController:
        return _CountingController(**kwargs)


def test_a_plugin_controller_overrides_steps_and_keeps_the_loop(
    off_cluster: pathlib.Path,
) -> None:
    with pytorch.init(
        hparams={"global_batch_size": 4, "lr": 0.1},
        checkpoint_storage=str(off_cluster / "ckpt"),
        enable_tensorboard_logging=False,
    ) as context:
        trial = onevar.OneVarTrial(context)
        _CountingTrainer(trial, context).fit(
            max_length=pytorch.Batch(8),
            validation_period=pytorch.Batch(4),
            checkpoint_policy="all",
        )
    assert _CountingController.evaluated == 2
    assert len(_CountingController.saved) == 2
    assert len(trial.counter.validation_metrics) == 2
    weights = onevar.expected_weights(0.1, 8)
    assert trial.model.weight.item() == pytest.approx(weights[-1], abs=1e-6)
