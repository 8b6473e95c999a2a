"""The on-disk token cache shared by the CLI and the SDK."""

from __future__ import annotations

import pathlib
import stat

from determined.client import TokenStore


def test_set_get_drop(tmp_path: pathlib.Path) -> None:
    store = TokenStore(tmp_path / "auth.json")
    assert store.get("http://localhost:8080") is None
    store.set("localhost:8080", "alice", "t-a")
    store.set("http://localhost:8080", "bob", "t-b")
    assert store.active_user("http://localhost:8080/") == "bob"
    assert store.get("http://localhost:8080") == "t-b"
    assert store.get("http://localhost:8080", "alice") == "t-a"
    assert store.get("http://other:8080", "alice") is None
    assert stat.S_IMODE((tmp_path / "auth.json").stat().st_mode) == 0o600
    store.drop("http://localhost:8080")
    assert store.active_user("http://localhost:8080") is None
    assert store.get("http://localhost:8080", "bob") is None
    assert store.get("http://localhost:8080", "alice") == "t-a"


def test_corrupt_file_is_ignored(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "auth.json"
    path.write_text("{not json")
    store = TokenStore(path)
    assert store.get("http://localhost:8080") is None
    store.set("http://localhost:8080", "admin", "tok")
    assert TokenStore(path).get("http://localhost:8080") == "tok"


def test_env_dir(tmp_path: pathlib.Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("DET_CONFIG_DIR", str(tmp_path / "cfg"))
    TokenStore().set("http://m:1", "u", "tok")
    assert (tmp_path / "cfg" / "auth.json").exists()
