"""``python -m determined.launch.trial``: loading the class and handing it to the plugin's runner."""

from __future__ import annotations

import pathlib
import sys
from typing import Any

import pytest

from determined.core import _hooks, hookimpl
from determined.launch import trial as launch_trial


class _Recorder:
    launcher = None

    def __init__(self) -> None:
        self.ran: list[tuple[type, Any]] = []

    def run(self, trial_class: type, cluster_info: Any) -> None:
        self.ran.append((trial_class, cluster_info))


class _RunnerPlugin:
    def __init__(self, runner: _Recorder) -> None:
        self.runner = runner

    @hookimpl
    def det_trial_runner(self, trial_class: type) -> _Recorder | None:
        return self.runner if trial_class.__name__ == "MyTrial" else None


@pytest.fixture()
def model_dir(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> pathlib.Path:
    (tmp_path / "model_def_launch.py").write_text("class MyTrial:\n    pass\nOTHER = 3\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("DET_CLUSTER_INFO", raising=False)
    yield tmp_path
    sys.modules.pop("model_def_launch", None)


def test_runner_gets_the_class(model_dir: pathlib.Path) -> None:
    runner = _Recorder()
    plugin = _RunnerPlugin(runner)
    _hooks.get_plugin_manager().register(plugin)
    try:
        assert launch_trial.main(["model_def_launch:MyTrial"]) == 0
    finally:
        _hooks.get_plugin_manager().unregister(plugin)
    ((cls, info),) = runner.ran
    assert cls.__name__ == "MyTrial" and info is None


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("model_def_launch", "expected MODULE:TrialClass"),
        ("no_such_module:MyTrial", "module 'no_such_module' not found"),
        ("model_def_launch:Missing", "has no attribute 'Missing'"),
        ("model_def_launch:OTHER", "is not a class"),
        ("model_def_launch:MyTrial", "no installed plugin can run"),
    ],
)
def test_clear_errors(
    model_dir: pathlib.Path, spec: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert launch_trial.main([spec]) == 1
    assert message in capsys.readouterr().err


def test_usage(capsys: pytest.CaptureFixture[str]) -> None:
    assert launch_trial.main([]) == 2
    assert "usage" in capsys.readouterr().err
