"""Running Native API scripts in a fresh interpreter of this venv."""

from __future__ import annotations

import importlib.metadata
import json
import os
import pathlib
import shutil
import subprocess
import sys
from typing import Any

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
DRIVER = pathlib.Path(__file__).resolve().parent / "native_driver.py"


PLUGIN_MODULES = {"pytorch": "determined.pytorch._runner", "keras": "determined.keras._plugin"}


def plugin_registration(plugin: str) -> str:
    """Python that registers ``plugin``'s trial runner when its ``determined`` entry point is
    missing (a development install older than the entry point), as the entry point would; else ""."""
    installed = {ep.name for ep in importlib.metadata.entry_points(group="determined")}
    if plugin in installed:
        return ""
    return (
        "\n\nimport importlib as _importlib\n"
        "from determined.core import _hooks as _det_hooks\n"
        f"_det_hooks.register(_importlib.import_module({PLUGIN_MODULES[plugin]!r}))\n"
    )


def example_context(example: str, tmp_path: pathlib.Path) -> pathlib.Path:
    """A copy of ``examples/<example>`` to submit or run (see ``plugin_registration``)."""
    context = tmp_path / example
    shutil.copytree(EXAMPLES / example, context, ignore=shutil.ignore_patterns("__pycache__"))
    with (context / "model_def.py").open("a") as model_def:
        model_def.write(plugin_registration(example))
    return context


def example_config(example: str, name: str, **overrides: Any) -> dict[str, Any]:
    config = yaml.safe_load((EXAMPLES / example / name).read_text())
    config.update(overrides)
    return config


def script_env(tmp_path: pathlib.Path, **extra: str) -> dict[str, str]:
    """No det task variables, user files (tokens, local checkpoints) under ``tmp_path``."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DET_", "TF_CONFIG", "KERAS_", "VIRTUAL_ENV", "XDG_"))
    }
    env.update(
        TF_CPP_MIN_LOG_LEVEL="2",
        DET_CONFIG_DIR=str(tmp_path / "config"),
        XDG_DATA_HOME=str(tmp_path / "data"),
        DET_MASTER="http://127.0.0.1:1",  # nothing listens: local runs must not need a master
    )
    env.update(extra)
    return env


def run_driver(
    tmp_path: pathlib.Path,
    context_dir: pathlib.Path,
    trial: str,
    config: dict[str, Any],
    mode: str,
    *flags: str,
    env: dict[str, str] | None = None,
    timeout: float = 240,
) -> subprocess.CompletedProcess[str]:
    """``python native_driver.py CONTEXT MODULE:Class CONFIG MODE [test]``; fails on non-zero exit."""
    result = subprocess.run(
        [sys.executable, str(DRIVER), str(context_dir), trial, json.dumps(config), mode, *flags],
        capture_output=True,
        text=True,
        env=env if env is not None else script_env(tmp_path),
        timeout=timeout,
    )
    assert result.returncode == 0, f"{result.stdout[-4000:]}\n{result.stderr[-8000:]}"
    return result


def local_checkpoints(tmp_path: pathlib.Path) -> list[int]:
    """``steps_completed`` of the checkpoints in the default local storage under ``tmp_path``."""
    storage = tmp_path / "data" / "determined"
    return sorted(
        json.loads(p.read_text())["steps_completed"] for p in storage.glob("*/metadata.json")
    )
