"""The cached venv holding TensorFlow alone, into which tests/keras/test_install_alone.py installs
det-core and det-plugin-keras from their wheels.

It lives under ``.cache/keras-alone-<hash>/`` (keyed by the lock file, both pyproject files and the
interpreter), so only its first build downloads and unpacks TensorFlow (about 100 s of one core).
``make test`` builds it beside the other install steps (``python3 tests/keras/alone_venv.py``); the
test builds it itself when it is missing. Standard library only (and keras_helpers, which is too):
it runs before ``.venv`` exists.
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

from keras_helpers import ROOT, clean_env

CONSTRAINTS = ROOT / "requirements" / "constraints.txt"
PACKAGES = [ROOT / "packages" / "core", ROOT / "packages" / "plugin-keras"]
BASE = ["tensorflow", "tensorboard"]
"""Preinstalled: what ``det-plugin-keras[tensorflow]`` asks for beyond det-core."""


def pip(python: pathlib.Path, *args: str, timeout: float = 900) -> None:
    """``python -m pip ARGS``; AssertionError with pip's output when it fails."""
    result = subprocess.run(
        [str(python), "-m", "pip", "--disable-pip-version-check", *args],
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=timeout,
    )
    assert result.returncode == 0, f"pip {' '.join(args)}\n{result.stdout[-3000:]}\n{result.stderr}"


def _key() -> str:
    digest = hashlib.sha256()
    for path in [CONSTRAINTS, *(p / "pyproject.toml" for p in PACKAGES)]:
        digest.update(path.read_bytes())
    digest.update(" ".join([sys.version, *BASE]).encode())
    return digest.hexdigest()[:16]


@contextlib.contextmanager
def locked() -> Iterator[None]:
    """Held while the venv is built or used: one process at a time touches it."""
    path = ROOT / ".cache" / "keras-alone.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def base_venv() -> pathlib.Path:
    """The cached venv holding TensorFlow only (built once per key); call it under :func:`locked`."""
    target = ROOT / ".cache" / f"keras-alone-{_key()}"
    if (target / ".ready").exists():
        return target
    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    venv.create(partial, with_pip=True)
    pip(partial / "bin" / "python", "install", "-q", "-c", str(CONSTRAINTS), *BASE)
    partial.rename(target)  # venv scripts are not used: everything runs as `python -m`
    (target / ".ready").write_text("ok\n")
    return target


if __name__ == "__main__":
    with locked():
        print(base_venv())
