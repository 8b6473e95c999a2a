"""det-core and det-plugin-keras installed alone, from their wheels, into a venv with TensorFlow: the
callback checkpoints, resumes and warm-starts off-cluster with no torch and no master installed.

The venv with TensorFlow is cached (``alone_venv.py``: ``make test`` builds it during the install, so
the test itself only does so when it is missing); the two wheels are rebuilt from the working tree
and reinstalled every time.
"""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest
from alone_venv import CONSTRAINTS, PACKAGES, base_venv, locked, pip
from keras_helpers import HERE, clean_env, run_script


@pytest.mark.slow
@pytest.mark.timeout(1200)  # the first run downloads TensorFlow into the cache
def test_core_and_keras_plugin_alone_from_wheels(tmp_path: pathlib.Path) -> None:
    wheels = tmp_path / "wheels"
    pip(
        pathlib.Path(sys.executable),
        "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(wheels),
        *map(str, PACKAGES),
    )  # fmt: skip
    built = sorted(p.name.split("-")[0] for p in wheels.glob("*.whl"))
    assert built == ["det_core", "det_plugin_keras"], built

    with locked():
        env_dir = base_venv()
        python = env_dir / "bin" / "python"
        # Relocated venvs keep their old prefix in pip's scripts: always `python -m pip`.
        subprocess.run(
            [str(python), "-m", "pip", "uninstall", "-y", "-q", "det-core", "det-plugin-keras"],
            capture_output=True,
            env=clean_env(),
        )
        (core_wheel,) = wheels.glob("det_core-*.whl")
        (keras_wheel,) = wheels.glob("det_plugin_keras-*.whl")
        pip(
            python, "install", "-q", "-c", str(CONSTRAINTS),
            str(core_wheel), f"det-plugin-keras[tensorflow] @ {keras_wheel.as_uri()}",
        )  # fmt: skip
        pip(python, "check")
        checks = (
            "import importlib.util as u, importlib.metadata as m\n"
            "assert u.find_spec('torch') is None, 'torch is installed'\n"
            "assert u.find_spec('determined.master') is None, 'det-master is installed'\n"
            "names = {d.metadata['Name'] for d in m.distributions()}\n"
            "assert {n for n in names if n.startswith('det-')} == {'det-core', 'det-plugin-keras'}\n"
            "assert 'keras' in {e.name for e in m.entry_points(group='determined')}\n"
            "import determined.keras, determined as det\n"
            "assert 'site-packages' in determined.keras.__path__[0], determined.keras.__path__\n"
        )
        run_script("-c", checks, python=python, cwd=tmp_path)
        result = run_script(HERE / "callback_scenario.py", str(tmp_path / "run"), python=python)
    assert result.stdout.split()[-2:] == ["tensorflow", "keras3"], result.stdout
