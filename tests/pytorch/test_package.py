"""The det.pytorch package: lazy imports, the trial-runner plugin, the entry point, small units."""

from __future__ import annotations

import importlib.metadata
import pathlib
import subprocess
import sys

import pytest
import tomllib

from determined.core import _hooks

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_import_loads_no_torch_and_lightning_is_lazy() -> None:
    code = (
        "import sys, determined, determined.pytorch as p, determined.pytorch._runner\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
        "assert 'determined.pytorch.lightning' not in sys.modules\n"
        "assert 'pytorch_lightning' not in sys.modules\n"
        "assert p.__path__[0].endswith('pytorch')\n"
        "p.PyTorchTrial\n"
        "assert 'torch' in sys.modules\n"
        "assert 'pytorch_lightning' not in sys.modules\n"
        "print('ok')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0 and "ok" in result.stdout, result.stderr


def test_init_file_extends_the_namespace_first() -> None:
    source = (ROOT / "packages/plugin-pytorch/src/determined/pytorch/__init__.py").read_text()
    code_lines = [line for line in source.split('"""', 2)[2].splitlines() if line.strip()]
    assert code_lines[:2] == [
        "import pkgutil as _pkgutil",
        "__path__ = _pkgutil.extend_path(__path__, __name__)",
    ]


def test_unknown_attribute_and_missing_deepspeed() -> None:
    import determined.pytorch as p

    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        p.Nope  # noqa: B018
    try:
        import determined.pytorch.deepspeed  # noqa: F401
    except ModuleNotFoundError:
        with pytest.raises(AttributeError, match="pip install det-plugin-deepspeed"):
            p.deepspeed  # noqa: B018


def test_entry_point_is_declared() -> None:
    pyproject = tomllib.loads((ROOT / "packages/plugin-pytorch/pyproject.toml").read_text())
    entry_points = pyproject["project"]["entry-points"]["determined"]
    assert entry_points == {"pytorch": "determined.pytorch._runner"}
    installed = [
        ep for ep in importlib.metadata.entry_points(group="determined") if ep.name == "pytorch"
    ]
    for ep in installed:  # once the package is (re)installed with it
        assert ep.value == "determined.pytorch._runner"


def test_trial_runner_hook_answers_for_pytorch_trials_only() -> None:
    import onevar

    from determined.pytorch import _runner

    _hooks.register(_runner, name="pytorch")
    runner = _hooks.trial_runner(onevar.OneVarTrial)
    assert runner.launcher == "determined.launch.torch_distributed"
    assert _runner.det_trial_runner(trial_class=int) is None
    with pytest.raises(ValueError, match="off-cluster"):
        runner.run(onevar.OneVarTrial, None)


def test_train_units() -> None:
    from determined import core, pytorch

    assert pytorch.Batch(3).should_stop(6) and not pytorch.Batch(3).should_stop(7)
    assert pytorch.Epoch([1, 4]).should_stop(4) and not pytorch.Epoch([1, 4]).should_stop(2)
    assert pytorch.Batch(0).should_stop(5)
    assert pytorch.TrainUnit._from_searcher_unit(640, core.Unit.RECORDS, 64) == pytorch.Batch(10)
    assert pytorch.TrainUnit._from_values(epochs=2) == pytorch.Epoch(2)
    assert pytorch.TrainUnit._from_values(batches=0) == pytorch.Batch(sys.maxsize)
    with pytest.raises(ValueError, match="global_batch_size"):
        pytorch.TrainUnit._from_searcher_unit(10, core.Unit.RECORDS)
    with pytest.raises(TypeError, match="int or a container"):
        pytorch.Batch("5")  # type: ignore[arg-type]
