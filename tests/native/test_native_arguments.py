"""The Native API's arguments and its local path, with a trial-runner plugin registered in-process
(no framework needed): hyperparameters drawn like a searcher's, test mode, the working directory,
one clear error per bad argument."""

from __future__ import annotations

import importlib.util
import os
import pathlib
import sys
from typing import Any

import pytest

import determined as det
from determined.core import _hooks, hookimpl
from determined.experimental import Mode, NativeContext, _native


class RecordingTrial:
    """A Trial class that only the plugin below can run."""


class RecordingRunner:
    launcher: str | None = None
    calls: list[tuple[det.ClusterInfo, str]] = []

    def run(self, trial_class: type, cluster_info: det.ClusterInfo | None) -> None:
        assert trial_class is RecordingTrial and cluster_info is not None
        assert det.get_cluster_info() is None, "a local run must stay off-cluster"
        self.calls.append((cluster_info, os.getcwd()))


class RecordingPlugin:
    @hookimpl
    def det_trial_runner(self, trial_class: type) -> RecordingRunner | None:
        return RecordingRunner() if trial_class is RecordingTrial else None


_hooks.register(RecordingPlugin(), name="tests.native.recording")

CONFIG: dict[str, Any] = {
    "hyperparameters": {
        "global_batch_size": 16,
        "lr": {"type": "log", "base": 10, "minval": -3, "maxval": -1},
        "layers": {"type": "categorical", "vals": [1, 2, 3]},
    },
    "searcher": {"name": "single", "metric": "loss", "max_length": {"batches": 500}},
    "min_validation_period": {"batches": 100},
    "reproducibility": {"experiment_seed": 5},
}


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path) -> None:
    RecordingRunner.calls = []
    monkeypatch.delenv("DET_CLUSTER_INFO", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))


def test_local_mode_runs_the_class_through_its_runner(tmp_path: pathlib.Path) -> None:
    det.experimental.create(RecordingTrial, CONFIG, mode=Mode.LOCAL, context_dir=tmp_path)
    ((info, cwd),) = RecordingRunner.calls
    assert cwd == str(tmp_path.resolve()) and os.getcwd() != cwd
    hparams = info.trial.hparams
    assert hparams["global_batch_size"] == 16 and hparams["layers"] in (1, 2, 3)
    assert 0.001 <= hparams["lr"] < 0.1
    config = info.trial._config
    assert config["searcher"]["max_length"] == {"batches": 500}
    assert config["checkpoint_storage"]["type"] == "shared_fs"  # det's defaults are filled in
    assert info.latest_checkpoint is None

    # The same seed draws the same trial; test mode shortens it to one batch.
    det.experimental.create(RecordingTrial, CONFIG, mode="local", test=True, latest_checkpoint="u")
    (_, (again, _)) = RecordingRunner.calls
    assert again.trial.hparams == hparams and again.trial.trial_seed == info.trial.trial_seed
    assert again.trial._config["searcher"]["max_length"] == {"batches": 1}
    assert again.trial._config["min_validation_period"] == {"batches": 0}
    assert again.latest_checkpoint == "u"


def test_upstream_argument_forms_pick_the_mode() -> None:
    det.experimental.create(RecordingTrial, CONFIG, True)  # 0.12.5's positional `local`
    det.experimental.create(RecordingTrial, CONFIG, local=True, test=True)
    assert len(RecordingRunner.calls) == 2


def test_init_locally_returns_the_trial_description() -> None:
    context = det.experimental.init(CONFIG, mode=Mode.LOCAL)
    assert isinstance(context, NativeContext) and context.cluster_info is None
    assert context.mode is Mode.LOCAL and context.hparams["global_batch_size"] == 16
    assert context.config["searcher"]["name"] == "single"


def test_bad_arguments_are_named(tmp_path: pathlib.Path) -> None:
    with pytest.raises(TypeError, match="trial_def: expected a Trial class"):
        det.experimental.create(RecordingTrial(), CONFIG)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="mode: expected Mode.LOCAL or Mode.CLUSTER"):
        det.experimental.create(RecordingTrial, CONFIG, mode="remote")
    with pytest.raises(ValueError, match="no installed plugin can run"):
        det.experimental.create(object, CONFIG, mode=Mode.CLUSTER, context_dir=tmp_path)
    with pytest.raises(ValueError, match="context_dir: required in Mode.CLUSTER"):
        det.experimental.create(RecordingTrial, CONFIG, mode=Mode.CLUSTER)
    with pytest.raises(ValueError, match="context_dir: .* is not a directory"):
        det.experimental.create(RecordingTrial, CONFIG, mode=Mode.LOCAL, context_dir=tmp_path / "x")
    with pytest.raises(ValueError, match="latest_checkpoint: only for Mode.LOCAL"):
        det.experimental.create(RecordingTrial, CONFIG, context_dir=tmp_path, latest_checkpoint="u")
    with pytest.raises(ValueError, match="searcher: required"):
        det.experimental.create(RecordingTrial, {"hyperparameters": {}}, mode=Mode.LOCAL)
    with pytest.raises(ValueError, match="command: must not be empty"):
        det.experimental.create(RecordingTrial, CONFIG, context_dir=tmp_path, command=[])


def test_entrypoints_of_a_submission(tmp_path: pathlib.Path) -> None:
    assert _native._command_string(["train.py", "--lr", "0.1"]) == "python3 train.py --lr 0.1"
    assert _native._command_string("python3 -m pkg.train") == "python3 -m pkg.train"
    here = pathlib.Path(__file__).resolve().parent
    assert _native._class_entrypoint(RecordingTrial, here) is None  # its module is not `tests...`
    module = tmp_path / "model_def.py"
    module.write_text("class MyTrial:\n    pass\n")
    spec = importlib.util.spec_from_file_location("model_def", module)
    assert spec is not None and spec.loader is not None
    loaded = importlib.util.module_from_spec(spec)
    sys.modules["model_def"] = loaded
    try:
        spec.loader.exec_module(loaded)
        assert _native._class_entrypoint(loaded.MyTrial, tmp_path) == "model_def:MyTrial"
        assert _native._class_entrypoint(loaded.MyTrial, here) is None
    finally:
        del sys.modules["model_def"]
