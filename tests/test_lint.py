"""The tree stays ruff-clean (lint and format); mypy runs in `make lint`."""

from __future__ import annotations

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
TREES = ["packages", "tests", "examples", "benchmarks"]


def _ruff(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ruff", *args, *TREES], cwd=ROOT, capture_output=True, text=True
    )


def test_ruff_check() -> None:
    result = _ruff("check", "--no-cache")
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format() -> None:
    result = _ruff("format", "--check", "--no-cache")
    assert result.returncode == 0, result.stdout + result.stderr
