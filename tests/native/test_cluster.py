"""``Mode.CLUSTER`` against a real det master (SQLite, loopback port): the script uploads the context
directory, creates the experiment, prints its id and ends; the master then trains the PyTorch and Keras
example trials, a Trial class defined in the script itself, and a plain script using ``init()``."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys
import textwrap
from typing import Any

import pytest
from e2e.harness import MasterAPI
from native_helpers import (
    example_config,
    example_context,
    plugin_registration,
    run_driver,
    script_env,
)

from determined.master import Master

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.fixture
def master(sqlite_master: Any) -> Any:
    """A fresh SQLite master (the root conftest's): these tests do not exercise the database."""
    return sqlite_master


def _submitted(result: subprocess.CompletedProcess[str]) -> int:
    """The id printed by the submission; the script must have ended right after it."""
    match = re.search(r"^Created experiment (\d+)$", result.stdout, re.MULTILINE)
    assert match, result.stdout + result.stderr[-3000:]
    assert "AFTER CREATE" not in result.stdout, "the script went on after submitting"
    return int(match.group(1))


def _completed(api: MasterAPI, experiment_id: int) -> dict[str, Any]:
    state = api.wait_experiment(experiment_id, timeout=240)
    assert state == "STATE_COMPLETED", api.debug(experiment_id)
    (trial,) = api.trials(experiment_id)
    return trial


def test_example_trials_are_submitted_and_trained_on_the_master(
    master: Master, tmp_path: pathlib.Path
) -> None:
    api = MasterAPI(master.url)
    env = script_env(tmp_path, DET_MASTER=master.url)
    pytorch_config = example_config(
        "pytorch",
        "const.yaml",
        searcher={"name": "single", "metric": "validation_loss", "max_length": {"batches": 40}},
        min_validation_period={"batches": 20},
    )
    pytorch_run = run_driver(
        tmp_path,
        example_context("pytorch", tmp_path),
        "model_def:DigitsTrial",
        pytorch_config,
        "cluster",
        env=env,
    )
    keras_config = example_config(
        "keras",
        "trial.yaml",
        searcher={
            "name": "single",
            "metric": "val_categorical_accuracy",
            "smaller_is_better": False,
            "max_length": {"epochs": 2},
        },
        min_validation_period={"epochs": 1},
    )
    keras_run = run_driver(
        tmp_path,
        example_context("keras", tmp_path),
        "model_def:IrisTrial",
        keras_config,
        "cluster",
        env=env,
    )
    pytorch_experiment, keras_experiment = _submitted(pytorch_run), _submitted(keras_run)
    assert api.experiment(pytorch_experiment)["config"]["entrypoint"] == "model_def:DigitsTrial"

    trial = _completed(api, pytorch_experiment)
    assert api.steps(api.metrics(trial["id"], "validation")) == [20, 40]
    trial = _completed(api, keras_experiment)
    validation = [api.values(v) for v in api.metrics(trial["id"], "validation")]
    assert [v["epochs"] for v in validation] == [1, 2], validation
    assert "val_categorical_accuracy" in validation[-1]


SCRIPT_TRIAL = """
import sys

import torch

import determined as det
from determined import pytorch


class TinyTrial(pytorch.PyTorchTrial):
    def __init__(self, context):
        self.context = context
        self.model = context.wrap_model(torch.nn.Linear(1, 1))
        self.optimizer = context.wrap_optimizer(torch.optim.SGD(self.model.parameters(), lr=0.1))

    def _data(self):
        x = torch.linspace(0, 1, 64).unsqueeze(1)
        return torch.utils.data.TensorDataset(x, 3 * x)

    def build_training_data_loader(self):
        return pytorch.DataLoader(self._data(), batch_size=8)

    def build_validation_data_loader(self):
        return pytorch.DataLoader(self._data(), batch_size=8)

    def train_batch(self, batch, epoch_idx, batch_idx):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.model(x), y)
        self.context.backward(loss)
        self.context.step_optimizer(self.optimizer)
        return {"loss": loss}

    def evaluate_batch(self, batch, batch_idx):
        x, y = batch
        return {"validation_loss": torch.nn.functional.mse_loss(self.model(x), y)}


CONFIG = {
    "name": "script-trial",
    "hyperparameters": {"global_batch_size": 8},
    "searcher": {"name": "single", "metric": "validation_loss", "max_length": {"batches": 16}},
    "min_validation_period": {"batches": 8},
}

det.experimental.create(TinyTrial, CONFIG, mode=sys.argv[1], context_dir=".")
print("AFTER CREATE", flush=True)
"""

SCRIPT_INIT = """
import sys

import determined as det

CONFIG = {
    "name": "plain-script",
    "hyperparameters": {"scale": {"type": "categorical", "vals": [7]}},
    "searcher": {"name": "single", "metric": "score", "smaller_is_better": False},
}

context = det.experimental.init(CONFIG, mode=sys.argv[1], context_dir=".")
with det.core.init() as core_context:
    for step in (1, 2, 3):
        core_context.train.report_training_metrics(step, {"loss": 1.0 / step})
    core_context.train.report_validation_metrics(3, {"score": context.hparams["scale"] * 3})
print("TRAINED", context.mode.value, context.hparams, flush=True)
"""


def _script(tmp_path: pathlib.Path, name: str, text: str, *args: str, **env: str) -> str:
    context = tmp_path / name
    context.mkdir()
    (context / "train.py").write_text(plugin_registration("pytorch") + textwrap.dedent(text))
    result = subprocess.run(
        [sys.executable, "train.py", *args],
        cwd=context,
        capture_output=True,
        text=True,
        env=script_env(tmp_path, **env),
        timeout=120,
    )
    assert result.returncode == 0, f"{result.stdout[-3000:]}\n{result.stderr[-6000:]}"
    return result.stdout


def test_scripts_run_locally_or_are_submitted_by_one_argument(
    master: Master, tmp_path: pathlib.Path
) -> None:
    api = MasterAPI(master.url)
    # init(): locally the script trains right away and goes on.
    local = _script(tmp_path, "init-local", SCRIPT_INIT, "local")
    assert "TRAINED local {'scale': 7}" in local
    # The same scripts with Mode.CLUSTER: the master runs `python3 train.py cluster`.
    trial_script = _submitted(
        subprocess.CompletedProcess(
            [], 0, _script(tmp_path, "trial", SCRIPT_TRIAL, "cluster", DET_MASTER=master.url), ""
        )
    )
    init_script = _submitted(
        subprocess.CompletedProcess(
            [], 0, _script(tmp_path, "init", SCRIPT_INIT, "cluster", DET_MASTER=master.url), ""
        )
    )
    assert api.experiment(trial_script)["config"]["entrypoint"] == "python3 train.py cluster"

    trial = _completed(api, trial_script)
    assert api.steps(api.metrics(trial["id"], "validation")) == [8, 16]
    assert not any("AFTER CREATE" in line for line in api.logs(trial["id"]))
    trial = _completed(api, init_script)
    (validation,) = api.metrics(trial["id"], "validation")
    assert api.values(validation)["score"] == 21
    assert any("TRAINED cluster {'scale': 7}" in line for line in api.logs(trial["id"]))
