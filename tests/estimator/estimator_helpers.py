"""Paths and the subprocess environment for the EstimatorTrial tests."""

from __future__ import annotations

import os
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
LEGACY_VENV = ROOT / ".venv-legacy"
LEGACY_PYTHON = LEGACY_VENV / "bin" / "python"
EXAMPLE = ROOT / "examples" / "estimator"
PLUGIN_SRC = ROOT / "packages" / "plugin-estimator" / "src"


def legacy_env(**extra: str) -> dict[str, str]:
    """This environment without det's task variables and venv markers, TensorFlow quiet."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DET_", "TF_CONFIG", "PYTHON", "VIRTUAL_ENV", "KERAS_"))
    }
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    env.update(extra)
    return env
