"""det-core and det-plugin-keras installed alone, from their wheels, into a venv with TensorFlow: the
callback checkpoints, resumes and warm-starts off-cluster with no torch and no master installed.

The venv with TensorFlow is cached under ``.cache/keras-alone-<hash>/`` (keyed by the lock file and
both pyproject files), so only the first run downloads TensorFlow; the two wheels are rebuilt from the
working tree and reinstalled every time.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import pathlib
import shutil
import subprocess
import sys
import venv
from collections.abc import Iterator

import pytest
from keras_helpers import HERE, ROOT, clean_env, run_script

CONSTRAINTS = ROOT / "requirements" / "constraints.txt"
PACKAGES = [ROOT / "packages" / "core", ROOT / "packages" / "plugin-keras"]
# Preinstalled in the cached venv: what `det-plugin-keras[tensorflow]` asks for beyond det-core.
BASE = ["tensorflow", "tensorboard"]


def _key() -> str:
    digest = hashlib.sha256()
    for path in [CONSTRAINTS, *(p / "pyproject.toml" for p in PACKAGES)]:
        digest.update(path.read_bytes())
    digest.update(" ".join([sys.version, *BASE]).encode())
    return digest.hexdigest()[:16]


@contextlib.contextmanager
def _locked(path: pathlib.Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _pip(python: pathlib.Path, *args: str, timeout: float = 900) -> None:
    result = subprocess.run(
        [str(python), "-m", "pip", "--disable-pip-version-check", *args],
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=timeout,
    )
    assert result.returncode == 0, f"pip {' '.join(args)}\n{result.stdout[-3000:]}\n{result.stderr}"


def _base_venv() -> pathlib.Path:
    """The cached venv holding TensorFlow only (built once per key)."""
    target = ROOT / ".cache" / f"keras-alone-{_key()}"
    if (target / ".ready").exists():
        return target
    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    venv.create(partial, with_pip=True)
    _pip(partial / "bin" / "python", "install", "-q", "-c", str(CONSTRAINTS), *BASE)
    partial.rename(target)  # venv scripts are not used: everything runs as `python -m`
    (target / ".ready").write_text("ok\n")
    return target


@pytest.mark.slow
@pytest.mark.timeout(1200)  # the first run downloads TensorFlow into the cache
def test_core_and_keras_plugin_alone_from_wheels(tmp_path: pathlib.Path) -> None:
    wheels = tmp_path / "wheels"
    _pip(
        pathlib.Path(sys.executable),
        "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(wheels),
        *map(str, PACKAGES),
    )  # fmt: skip
    built = sorted(p.name.split("-")[0] for p in wheels.glob("*.whl"))
    assert built == ["det_core", "det_plugin_keras"], built

    with _locked(ROOT / ".cache" / "keras-alone.lock"):
        env_dir = _base_venv()
        python = env_dir / "bin" / "python"
        # Relocated venvs keep their old prefix in pip's scripts: always `python -m pip`.
        subprocess.run(
            [str(python), "-m", "pip", "uninstall", "-y", "-q", "det-core", "det-plugin-keras"],
            capture_output=True,
            env=clean_env(),
        )
        (core_wheel,) = wheels.glob("det_core-*.whl")
        (keras_wheel,) = wheels.glob("det_plugin_keras-*.whl")
        _pip(
            python, "install", "-q", "-c", str(CONSTRAINTS),
            str(core_wheel), f"det-plugin-keras[tensorflow] @ {keras_wheel.as_uri()}",
        )  # fmt: skip
        _pip(python, "check")
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
