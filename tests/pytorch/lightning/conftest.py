"""Fixtures for the det.pytorch.lightning tests: the tiny module of ``trials/tiny.py``; the master
(``api``) is the root conftest's."""

from __future__ import annotations

import importlib.util
import pathlib
import types

import pytest

TRIALS = pathlib.Path(__file__).parent / "trials"


@pytest.fixture(scope="session")
def tiny() -> types.ModuleType:
    """``trials/tiny.py``, the experiment context's module, imported for in-process tests."""
    spec = importlib.util.spec_from_file_location("det_lightning_tiny", TRIALS / "tiny.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(autouse=True)
def _cwd_in_tmp(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Lightning writes next to the cwd (``<logger name>/<version>/checkpoints`` when a Trainer
    adds its own ModelCheckpoint): keep that inside the test's tmp dir, not the repository."""
    monkeypatch.chdir(tmp_path)
