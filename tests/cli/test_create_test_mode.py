"""``det experiment create --test`` and ``--local`` on a real master (SQLite, loopback port).

Every experiment example in examples/ (one aside, below) passes test mode: its test experiment
trains, validates, checkpoints, and its trial restarts from the checkpoint and ends normally.
Lengths that the examples' scripts set themselves are shortened with ``--config entrypoint=...``.
A trial whose checkpoint cannot be loaded fails with a message naming the checkpoint and the
trial's log tail.
``--local --test`` needs no master: the CLI starts one for the command.

The examples run in parallel under xdist (one parametrized test each); examples/hydra is a
``det-cli launch`` / Hydra-launcher example with no experiment YAML of its own, so it is not here.
keras/const.yaml is not here either: tests/keras/test_examples.py runs it to completion and pauses
and resumes it from its checkpoint (what test mode would check, a TensorFlow start-up less); its
test config is checked below with every other example's.
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable

import pytest
import yaml
from cli.harness import Det

from determined.client import Session

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
LEGACY_VENV = ROOT / ".venv-legacy"

# (directory under examples/, config file, --config overrides, saves a checkpoint)
CASES: list[tuple[str, str, list[str], bool]] = [
    ("core_api", "0_start.yaml", [], False),
    ("core_api", "1_metrics.yaml", [], False),
    ("core_api", "2_checkpoints.yaml", [], True),
    ("core_api", "3_hpsearch.yaml", [], True),
    ("core_api", "4_distributed.yaml", ["resources.slots_per_trial=2"], True),
    ("pytorch", "const.yaml", ["entrypoint=python3 train.py --batches 4 --validate-every 2"], True),
    ("pytorch/lightning", "const.yaml", [], True),
    ("keras", "trial.yaml", [], True),
    (
        "deepspeed",
        "const.yaml",
        ["entrypoint=python3 train.py --batches 4 --validate-every 2"],
        True,
    ),
    ("transformers", "const.yaml", ["entrypoint=python3 train.py --max-steps 50"], True),
    ("estimator", "const.yaml", [f"environment.venv={LEGACY_VENV}"], True),
]

BROKEN_TRIAL = r"""
import pathlib

import determined as det

info = det.get_cluster_info()
with det.core.init() as core:
    if info.latest_checkpoint:
        # The bug under test: it saves "state.txt" but loads "weights.txt".
        with core.checkpoint.restore_path(info.latest_checkpoint) as path:
            step = int((path / "weights.txt").read_text())
    for step in (1, 2):
        core.train.report_training_metrics(steps_completed=step, metrics={"loss": 1.0 / step})
    core.train.report_validation_metrics(steps_completed=2, metrics={"validation_loss": 0.5})
    with core.checkpoint.store_path({"steps_completed": 2}) as (path, _):
        (path / "state.txt").write_text("2")
"""


def _example_id(case: tuple[str, str, list[str], bool]) -> str:
    return f"{case[0]}/{case[1]}"


@pytest.mark.parametrize("case", CASES, ids=_example_id)
def test_every_example_passes_test_mode(
    det: Det, api: Session, case: tuple[str, str, list[str], bool]
) -> None:
    directory, config_file, overrides, checkpoints = case
    if directory == "estimator" and not (LEGACY_VENV / "bin" / "python").exists():
        pytest.skip("needs the legacy venv (make legacy-venv)")
    context = EXAMPLES / directory
    argv = ["experiment", "create", "--test", str(context / config_file), str(context)]
    for override in overrides:
        argv += ["--config", override]
    code, out, err = det.run(*argv)
    assert code == 0, f"{out}\n{err}"
    assert "Experiment configuration validation succeeded" in out
    assert "Scheduling task... [✔]" in out
    assert "Model definition test succeeded" in out, out
    if checkpoints:
        for stage in ("training", "validation", "checkpointing", "restore"):
            assert f"Testing {stage}... [✔]" in out, out
    experiment_id = int(out.split("Created test experiment ", 1)[1].split()[0])
    experiment = api.request("GET", f"/api/v1/experiments/{experiment_id}")["experiment"]
    assert experiment["archived"] is True
    assert experiment["config"]["searcher"]["name"] == "single"
    assert experiment["description"].startswith("[test-mode]")


def test_a_checkpoint_that_cannot_be_restored_fails_clearly(
    det: Det, tmp_path: pathlib.Path, write_config: Callable[..., pathlib.Path]
) -> None:
    context = tmp_path / "broken"
    context.mkdir()
    (context / "train.py").write_text(BROKEN_TRIAL)
    code, out, err = det.run("e", "create", "-t", str(write_config()), str(context))
    assert code == 1, out
    assert "Testing checkpointing... [✔]" in out
    assert "Testing restore... [✗]" in out
    assert "could not be restored" in err and "Model definition test failed" in err
    assert "weights.txt" in err  # the trial's own error, from its log tail
    assert "Model definition test succeeded" not in out


def test_test_config_is_single_short_and_keeps_a_checkpoint(det: Det) -> None:
    from determined.cli._experiment_test_mode import make_test_config

    config = yaml.safe_load((EXAMPLES / "core_api" / "3_hpsearch.yaml").read_text())
    config["checkpoint_storage"] = {"type": "shared_fs", "save_trial_latest": 0}
    test = make_test_config(config)
    assert test["searcher"] == {
        "name": "single",
        "metric": "validation_loss",
        "smaller_is_better": True,
        "max_length": {"batches": 1},
    }
    assert test["max_restarts"] == 0
    assert test["checkpoint_storage"]["save_trial_latest"] == 1
    assert test["hyperparameters"] == config["hyperparameters"]
    assert config["searcher"]["name"] == "adaptive_asha"  # the input is not changed


def test_every_example_config_makes_a_valid_test_config(api: Session) -> None:
    """All experiment YAMLs of examples/ (adaptive and distributed ones too), as the master
    validates them (``validateOnly``): the test config of each is a valid experiment."""
    from determined.cli._experiment_test_mode import make_test_config
    from determined.client import create_experiment

    configs = sorted(p for p in EXAMPLES.rglob("*.yaml") if "hydra" not in p.parts)
    assert len(configs) >= 20
    for path in configs:
        test = make_test_config(yaml.safe_load(path.read_text()))
        resources = test.get("resources") or {}
        if resources.get("slots_per_trial", 1) > 4:  # this master has 4 slots
            test["resources"] = {**resources, "slots_per_trial": 2}
        assert test["searcher"]["name"] == "single", path
        created = create_experiment(api, test, [], validate_only=True)
        assert created.id is None, path


def test_local_test_mode_needs_no_master(det: Det, tmp_path: pathlib.Path) -> None:
    """The installed ``det`` script with an unreachable master: --local starts its own."""
    context = EXAMPLES / "core_api"
    result = det.sh(
        "-m",
        "http://127.0.0.1:9",
        "e",
        "create",
        "--local",
        "--test",
        str(context / "2_checkpoints.yaml"),
        str(context),
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Started a local det master" in result.stdout
    assert "Testing restore... [✔]" in result.stdout
    assert "Model definition test succeeded" in result.stdout


def test_local_mode_runs_the_experiment_to_its_end(det: Det) -> None:
    context = EXAMPLES / "core_api"
    code, _, err = det.run("e", "create", "--local", "--paused", str(context / "0_start.yaml"))
    assert code == 1 and "--paused cannot be used" in err
    result = det.sh("e", "create", "--local", str(context / "1_metrics.yaml"), str(context))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ended COMPLETED" in result.stdout
    assert "Trial log stream ended" in result.stderr or "Following first trial" in result.stdout
