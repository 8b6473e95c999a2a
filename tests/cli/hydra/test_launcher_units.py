"""The det launcher's pieces that need no master: the experiment it builds, the context it
uploads, where it finds the app, and how results are encoded."""

from __future__ import annotations

import importlib
import pathlib
import sys
import textwrap

import pytest
from hydra_plugins.det_launcher import _core, _protocol
from hydra_plugins.det_launcher._config import DetLauncherConf
from omegaconf import OmegaConf


def test_experiment_is_a_grid_over_the_job_numbers() -> None:
    settings = DetLauncherConf(
        python="/opt/venv/bin/python",
        max_concurrent_trials=2,
        resources={"slots_per_trial": 2, "resource_pool": "cpu"},
        experiment={"searcher": {"max_concurrent_trials": 3}, "labels": ["x"]},
    )
    config = _core.experiment_config(settings, "app", {4: ["lr=0.1"], 5: ["lr=0.2", "+b=1"]})
    assert config["name"] == "app"
    assert config["entrypoint"] == (
        "/opt/venv/bin/python -m hydra_plugins.det_launcher._trial det_hydra_jobs.pkl"
    )
    assert config["searcher"] == {
        "name": "grid",
        "metric": "return_value",
        "smaller_is_better": True,
        "max_concurrent_trials": 3,  # hydra.launcher.experiment wins, key by key
    }
    assert config["hyperparameters"] == {
        "hydra_job": {"type": "categorical", "vals": [4, 5]},
        "hydra_overrides": {"type": "const", "val": {"4": "lr=0.1", "5": "lr=0.2 +b=1"}},
    }
    assert config["resources"] == {"slots_per_trial": 2, "resource_pool": "cpu"}
    assert config["max_restarts"] == 0
    assert config["labels"] == ["x"]


def test_the_grid_runs_every_job_once() -> None:
    from determined.searcher import hparam_grid

    config = _core.experiment_config(DetLauncherConf(), "app", {n: [f"a={n}"] for n in range(5)})
    points = hparam_grid(config["hyperparameters"])
    assert sorted(p["hydra_job"] for p in points) == [0, 1, 2, 3, 4]


def test_context_leaves_out_hydra_outputs(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = tmp_path / "app"
    for path in ["my_app.py", "conf/config.yaml", "lib/util.py", "data/outputs/keep.txt"]:
        (app / path).parent.mkdir(parents=True, exist_ok=True)
        (app / path).write_text("x")
    for path in ["multirun/2024/0/.hydra/config.yaml", "outputs/old.log", "__pycache__/a.pyc"]:
        (app / path).parent.mkdir(parents=True, exist_ok=True)
        (app / path).write_text("x")
    monkeypatch.chdir(app)
    config = OmegaConf.create(
        {"hydra": {"sweep": {"dir": "multirun/2025"}, "run": {"dir": "outputs/now"}}}
    )
    leave_out = _core.output_roots(config, app)
    assert leave_out == {"multirun", "outputs"}
    target = tmp_path / "staged"
    _core.stage_context(app, target, leave_out)
    staged = sorted(p.relative_to(target).as_posix() for p in target.rglob("*") if p.is_file())
    assert staged == ["conf/config.yaml", "data/outputs/keep.txt", "lib/util.py", "my_app.py"]


def test_outputs_outside_the_context_leave_nothing_out(tmp_path: pathlib.Path) -> None:
    config = OmegaConf.create({"hydra": {"sweep": {"dir": str(tmp_path / "elsewhere")}}})
    (tmp_path / "app").mkdir()
    assert _core.output_roots(config, tmp_path / "app") == set()


def test_app_root_of_a_script_and_of_a_package(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "src" / "det_hydra_pkg" / "apps"
    package.mkdir(parents=True)
    (package.parent / "__init__.py").write_text("")
    (package / "__init__.py").write_text("def task(cfg):\n    return 0\n")
    (package / "train.py").write_text("def task(cfg):\n    return 1\n")
    monkeypatch.syspath_prepend(str(tmp_path / "src"))
    try:
        module = importlib.import_module("det_hydra_pkg.apps.train")
        assert _core.app_root(module.task) == tmp_path / "src"
        init = importlib.import_module("det_hydra_pkg.apps")
        assert _core.app_root(init.task) == tmp_path / "src"
    finally:
        for name in [n for n in sys.modules if n.startswith("det_hydra_pkg")]:
            del sys.modules[name]

    script = tmp_path / "scripts" / "my_app.py"
    script.parent.mkdir()
    script.write_text(textwrap.dedent("def task(cfg):\n    return 2\n"))
    namespace: dict[str, object] = {}
    code = compile(script.read_text(), str(script), "exec")
    fake_main = type(sys)("__det_test_main__")
    fake_main.__file__ = str(script)
    monkeypatch.setitem(sys.modules, "__det_test_main__", fake_main)
    namespace["__name__"] = "__det_test_main__"
    exec(code, namespace)
    task = namespace["task"]
    assert _core.app_root(task) == script.parent  # type: ignore[arg-type]


def test_results_are_json() -> None:
    ok = _protocol.encode_result(
        3, ["a=1"], True, (1, OmegaConf.create({"x": [1.5]}), float("nan"))
    )
    assert ok == {
        "job": 3,
        "overrides": ["a=1"],
        "status": "COMPLETED",
        "return_value": [1, {"x": [1.5]}, "nan"],
    }
    try:
        raise ValueError("bad lr")
    except ValueError as exc:
        failed = _protocol.encode_result(0, [], False, exc)
    assert failed["status"] == "FAILED"
    assert failed["error_type"] == "ValueError" and failed["error"] == "bad lr"
    assert "raise ValueError" in failed["traceback"]
    assert _protocol.jsonable(object()).startswith("<object object")
    assert _protocol.number(True) is None and _protocol.number(2) == 2.0


def test_settings_reject_wrong_types() -> None:
    from omegaconf.errors import ValidationError

    node = OmegaConf.structured(DetLauncherConf)
    with pytest.raises(ValidationError):
        node.max_restarts = "many"
