"""Fixtures for the det.pytorch.lightning tests: the tiny module of ``trials/tiny.py`` and a master."""

from __future__ import annotations

import importlib.util
import pathlib
import types
from collections.abc import Iterator

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


@pytest.fixture
def master_url(tmp_path: pathlib.Path) -> Iterator[str]:
    """A real det master (SQLite) on a free loopback port."""
    from determined.master import Master, MasterConfig

    master = Master(
        MasterConfig(host="127.0.0.1", port=0, data_dir=str(tmp_path / "master"), slots=4)
    )
    master.start()
    try:
        yield master.url
    finally:
        master.stop()


@pytest.fixture(autouse=True)
def _cwd_in_tmp(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Lightning writes next to the cwd (``<logger name>/<version>/checkpoints`` when a Trainer
    adds its own ModelCheckpoint): keep that inside the test's tmp dir, not the repository."""
    monkeypatch.chdir(tmp_path)
