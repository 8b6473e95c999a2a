"""det-plugin-deepspeed as a plugin: lazy imports, its entry point and the trial-runner hook."""

from __future__ import annotations

import importlib.metadata
import pathlib
import subprocess
import sys

import lintrial
import pytest
import tomllib

import determined as det
from determined.core import _hooks
from determined.pytorch.deepspeed import _runner

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_plugin_discovery_imports_no_torch() -> None:
    code = (
        "import sys, determined.pytorch.deepspeed._runner, determined.pytorch.deepspeed as d; "
        "print(sorted(m for m in ('torch', 'deepspeed') if m in sys.modules)); "
        "print(d.DeepSpeedTrial.__module__, 'torch' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.split("\n")[:2] == [
        "[]",
        "determined.pytorch.deepspeed._trial True",
    ], result.stderr
    assert det.pytorch.deepspeed.Trainer.__name__ == "Trainer"
    with pytest.raises(AttributeError, match="has no attribute 'Nope'"):
        det.pytorch.deepspeed.Nope  # noqa: B018


def test_entry_point_declares_the_runner() -> None:
    pyproject = tomllib.loads((ROOT / "packages/plugin-deepspeed/pyproject.toml").read_text())
    entry_points = pyproject["project"]["entry-points"]["determined"]
    assert entry_points == {"deepspeed": "determined.pytorch.deepspeed._runner"}
    installed = [
        ep for ep in importlib.metadata.entry_points(group="determined") if ep.name == "deepspeed"
    ]
    for ep in installed:  # empty until the distribution is reinstalled with its entry point
        assert ep.value == "determined.pytorch.deepspeed._runner"


def test_trial_runner_hook() -> None:
    _hooks.register(_runner, name="deepspeed")
    runner = _hooks.trial_runner(lintrial.LinTrial)
    assert isinstance(runner, _runner.DeepSpeedTrialRunner)
    assert runner.launcher == "determined.launch.deepspeed"
    assert _runner.det_trial_runner(trial_class=int) is None
    with pytest.raises(ValueError, match="runs as an experiment trial"):
        runner.run(lintrial.LinTrial, None)
