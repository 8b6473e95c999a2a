"""The master's own settings (flags and --config-file)."""

from __future__ import annotations

import pathlib

import pytest

from determined.master import MasterConfig


def test_config_file_and_overrides(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "master.yaml"
    path.write_text(f"port: 9000\nslots: 3\ndata-dir: {tmp_path / 'd'}\ncluster_name: lab\n")
    config = MasterConfig.from_file(path, port=9100, host=None)
    assert config.port == 9100 and config.slots == 3 and config.cluster_name == "lab"
    assert config.db_url() == f"sqlite:///{tmp_path / 'd' / 'det.sqlite'}"
    storage = config.checkpoint_storage_config()
    assert storage == {"type": "shared_fs", "host_path": str(tmp_path / "d" / "checkpoints")}
    assert config.resource_manager_config() == {"type": "local", "slots": 3}


def test_config_file_rejects_unknown_keys(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "master.yaml"
    path.write_text("prot: 1\n")
    with pytest.raises(ValueError, match="unknown setting 'prot'"):
        MasterConfig.from_file(path)
    with pytest.raises(ValueError, match="port"):
        MasterConfig(port=70000).check()
