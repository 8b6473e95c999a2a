"""The legacy venv's EstimatorTrial tests (``tests/estimator/legacy``) as one test of the main suite.

``make install`` builds ``.venv-legacy`` with det-plugin-estimator (``make legacy-venv``); this runs
pytest there, so ``make test`` fails when they fail.
"""

from __future__ import annotations

import pathlib
import subprocess

from estimator_helpers import LEGACY_PYTHON, ROOT, legacy_env


def test_legacy_suite_passes() -> None:
    assert LEGACY_PYTHON.exists(), (
        f"{LEGACY_PYTHON} is missing: build the legacy venv with `make legacy-venv`"
    )
    here = pathlib.Path(__file__).resolve().parent
    result = subprocess.run(
        [str(LEGACY_PYTHON), "-m", "pytest", "-q", "-p", "no:cacheprovider", str(here / "legacy")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=legacy_env(),
        timeout=600,
    )
    assert result.returncode == 0, f"{result.stdout[-6000:]}\n{result.stderr[-4000:]}"
    assert " passed" in result.stdout and "skipped" not in result.stdout, result.stdout
