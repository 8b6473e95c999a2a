"""The built-in storage plugin, through a fresh plugin manager and through det's hook facade
(``determined.core.plugins``, the process-wide plugin manager)."""

from __future__ import annotations

import pathlib

import pluggy
import pytest

from determined.core import hookspecs, plugins
from determined.core.plugins import PROJECT_NAME
from determined.storage import FsspecStorageManager, _plugin


def _plugin_manager() -> pluggy.PluginManager:
    pm = pluggy.PluginManager(PROJECT_NAME)
    pm.add_hookspecs(hookspecs)
    pm.register(_plugin, name="determined.storage._plugin")
    return pm


def test_plugin_answers_known_types(tmp_path: pathlib.Path) -> None:
    pm = _plugin_manager()
    manager = pm.hook.det_checkpoint_storage(
        config={"type": "directory", "container_path": str(tmp_path)}
    )
    assert isinstance(manager, FsspecStorageManager)
    assert pm.hook.det_checkpoint_storage(config={"type": "somebody-elses"}) is None


def test_a_third_party_plugin_takes_precedence(tmp_path: pathlib.Path) -> None:
    pm = _plugin_manager()
    sentinel = object()

    class Override:
        @pluggy.HookimplMarker(PROJECT_NAME)
        def det_checkpoint_storage(self, config: dict) -> object:
            return sentinel

    pm.register(Override())
    assert (
        pm.hook.det_checkpoint_storage(config={"type": "directory", "container_path": "/x"})
        is sentinel
    )


def test_facade_registers_the_storage_plugin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DET_DISABLE_PLUGIN_AUTOLOAD", "1")
    pm = plugins.get_plugin_manager()
    assert pm.get_plugin("determined.storage._plugin") is _plugin


def test_facade_returns_our_manager(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DET_DISABLE_PLUGIN_AUTOLOAD", "1")
    manager = plugins.checkpoint_storage({"type": "shared_fs", "host_path": str(tmp_path)})
    assert isinstance(manager, FsspecStorageManager)
    with manager.store_path("abc") as path:
        (path / "f").write_text("x")
    assert manager.list_files("abc") == {"f": 1}


def test_facade_unknown_type(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DET_DISABLE_PLUGIN_AUTOLOAD", "1")
    with pytest.raises(ValueError, match=r"checkpoint_storage\.type"):
        plugins.checkpoint_storage({"type": "tape-drive"})
    with pytest.raises(ValueError, match=r"checkpoint_storage\.host_path"):
        plugins.checkpoint_storage({"type": "shared_fs"})
