"""Hydra's own launcher conformance suite, run against the det launcher and a real master.

Each launching test runs a sweep as one det experiment: the trials unpickle the task function
(closures of the test included) and run it in subprocesses started by the master.
"""

from __future__ import annotations

import pathlib
import threading
from collections.abc import Callable
from typing import Any

import pytest
from e2e.harness import MasterAPI
from hydra.core.plugins import Plugins
from hydra.plugins.launcher import Launcher
from hydra.test_utils.launcher_common_tests import (
    BatchedSweeperTestSuite,
    LauncherTestSuite,
)
from hydra.test_utils.test_utils import TSweepRunner

# imported before any test snapshots Hydra's singletons, so hydra/launcher=det stays registered
from hydra_plugins.det_launcher._core import DetJobError, DetLauncherError
from hydra_plugins.det_launcher.det_launcher import DetLauncher
from omegaconf import DictConfig

from determined.master import Master


def test_hydra_discovers_the_launcher() -> None:
    assert DetLauncher.__name__ in [p.__name__ for p in Plugins.instance().discover(Launcher)]


@pytest.fixture
def launcher_name() -> str:
    return "det"


@pytest.fixture
def overrides(det_master: Master, tmp_path: pathlib.Path) -> list[str]:
    context = tmp_path / "context"
    context.mkdir()
    return [f"hydra.launcher.master={det_master.url}", f"hydra.launcher.context_dir={context}"]


class TestDetLauncher(LauncherTestSuite):
    """The launcher contract: returns, configs, overrides, output dirs, errors."""


class TestDetLauncherBatches(BatchedSweeperTestSuite):
    """A sweeper that hands out several batches: one experiment per batch."""

    @pytest.fixture
    def overrides(self, overrides: list[str]) -> list[str]:
        return [*overrides, "hydra.sweeper.max_batch_size=2"]


# ---- beyond Hydra's suite: what comes back from the trials --------------------------------------


def sweep(
    hydra_sweep_runner: TSweepRunner,
    overrides: list[str],
    task_function: Callable[[DictConfig], Any],
    tmp_path: pathlib.Path,
    *extra: str,
) -> Any:
    return hydra_sweep_runner(
        calling_file=None,
        calling_module="hydra.test_utils.a_module",
        task_function=task_function,
        config_path="configs",
        config_name="compose",
        overrides=["hydra/launcher=det", *overrides, *extra],
        temp_dir=tmp_path / "sweep",
    )


@pytest.mark.usefixtures("hydra_restore_singletons")
def test_numeric_returns_are_the_searcher_metric(
    hydra_sweep_runner: TSweepRunner,
    overrides: list[str],
    tmp_path: pathlib.Path,
    api: MasterAPI,
) -> None:
    def task(cfg: DictConfig) -> float:
        return float(cfg.bar) / 4

    extra = [
        "bar=100,300,200",
        "hydra.launcher.name=bars",
        "hydra.launcher.smaller_is_better=false",
    ]
    with sweep(hydra_sweep_runner, overrides, task, tmp_path, *extra) as runner:
        (batch,) = runner.returns
        assert [job.return_value for job in batch] == [25.0, 75.0, 50.0]
    (experiment,) = [
        e for e in api.get("/api/v1/experiments")["experiments"] if e["name"] == "bars"
    ]
    config = api.experiment(experiment["id"])["config"]
    assert config["searcher"]["name"] == "grid"
    assert config["searcher"]["smaller_is_better"] is False
    assert config["hyperparameters"]["hydra_overrides"]["val"] == {
        "0": "bar=100",
        "1": "bar=300",
        "2": "bar=200",
    }
    metrics = {
        t["hparams"]["hydra_job"]: t["searcherMetricValue"] for t in api.trials(experiment["id"])
    }
    assert metrics == {0: 25.0, 1: 75.0, 2: 50.0}


@pytest.mark.usefixtures("hydra_restore_singletons")
def test_return_values_come_back_as_json(
    hydra_sweep_runner: TSweepRunner, overrides: list[str], tmp_path: pathlib.Path
) -> None:
    def task(cfg: DictConfig) -> Any:
        return {"pair": (1, 2), "cfg": cfg, "nothing": None, "text": "ok"}

    with sweep(hydra_sweep_runner, overrides, task, tmp_path) as runner:
        (batch,) = runner.returns
        assert batch[0].return_value == {
            "pair": [1, 2],
            "cfg": {"foo": 10, "bar": 100},
            "nothing": None,
            "text": "ok",
        }


@pytest.mark.usefixtures("hydra_restore_singletons")
def test_a_failing_task_raises_with_its_error_and_log(
    hydra_sweep_runner: TSweepRunner, overrides: list[str], tmp_path: pathlib.Path
) -> None:
    def task(cfg: DictConfig) -> Any:
        if cfg.bar == 200:
            raise KeyError("no bar 200")
        return cfg.bar

    runner = sweep(hydra_sweep_runner, overrides, task, tmp_path, "bar=100,200")
    with pytest.raises(DetJobError, match=r"hydra job #1 raised KeyError: 'no bar 200'") as info:
        runner.__enter__()
    log_file = tmp_path / "sweep" / "1" / "a_module.log"
    assert f"its log: {log_file}" in str(info.value)
    assert "KeyError: 'no bar 200'" in log_file.read_text()
    assert "returned 100" in (tmp_path / "sweep" / "0" / "a_module.log").read_text()


@pytest.mark.usefixtures("hydra_restore_singletons")
def test_experiment_settings_are_merged(
    hydra_sweep_runner: TSweepRunner,
    overrides: list[str],
    tmp_path: pathlib.Path,
    api: MasterAPI,
) -> None:
    extra = [
        "hydra.launcher.name=merged",
        "+hydra.launcher.experiment.description=from hydra",
        "+hydra.launcher.experiment.labels=[sweep]",
        "hydra.launcher.max_restarts=1",
    ]
    with sweep(hydra_sweep_runner, overrides, lambda cfg: 1, tmp_path, *extra) as runner:
        assert runner.returns[0][0].return_value == 1
    (experiment,) = [
        e for e in api.get("/api/v1/experiments")["experiments"] if e["name"] == "merged"
    ]
    config = api.experiment(experiment["id"])["config"]
    assert config["description"] == "from hydra"
    assert config["labels"] == ["sweep"]
    assert config["max_restarts"] == 1
    assert config["resources"]["slots_per_trial"] == 1


@pytest.mark.usefixtures("hydra_restore_singletons")
def test_an_unpicklable_task_is_refused_before_submitting(
    hydra_sweep_runner: TSweepRunner,
    overrides: list[str],
    tmp_path: pathlib.Path,
    api: MasterAPI,
) -> None:
    lock = threading.Lock()

    def task(cfg: DictConfig) -> Any:
        with lock:
            return 1

    before = api.get("/api/v1/experiments")["pagination"]["total"]
    runner = sweep(hydra_sweep_runner, overrides, task, tmp_path)
    with pytest.raises(DetLauncherError, match="cannot be pickled for the trials: .*lock"):
        runner.__enter__()
    assert api.get("/api/v1/experiments")["pagination"]["total"] == before
