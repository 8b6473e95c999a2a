"""The legacy venv's tests (tf.keras 2.15, ``tests/keras/legacy``) as one test of the main suite.

``make install`` builds ``.venv-legacy`` (``make legacy-venv``); this runs pytest there, so ``make
test`` fails when they fail, and xdist runs them beside the rest.
"""

from __future__ import annotations

import subprocess

from keras_helpers import HERE, LEGACY_PYTHON, ROOT, clean_env


def test_legacy_suite_passes() -> None:
    assert LEGACY_PYTHON.exists(), (
        f"{LEGACY_PYTHON} is missing: build the legacy venv with `make legacy-venv`"
    )
    result = subprocess.run(
        [str(LEGACY_PYTHON), "-m", "pytest", "-q", "-p", "no:cacheprovider", str(HERE / "legacy")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=clean_env(),
        timeout=600,
    )
    assert result.returncode == 0, f"{result.stdout[-6000:]}\n{result.stderr[-4000:]}"
    assert " passed" in result.stdout and "skipped" not in result.stdout, result.stdout
