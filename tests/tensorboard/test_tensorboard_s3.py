"""TensorBoard over S3 checkpoint storage (a real moto server): the PyTorch and Keras examples
upload their event files to the bucket, ``det tensorboard start`` on both experiments serves their
metrics through the master's proxy, and ``delete-tb-files`` empties the experiment's prefix."""

from __future__ import annotations

import pathlib
import re
from typing import Any

import pytest
from cli.harness import Det
from tb_testing import URL_LINE, S3Server, check_scalars, create_example_experiments

from determined.core import plugins
from determined.tensorboard import experiment_storage_path

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_s3_storage_end_to_end(
    make_module_master: Any,
    s3_server: S3Server,
    tmp_path: pathlib.Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: Any,
) -> None:
    master = make_module_master()
    api = master.api()
    storage = s3_server.storage_config("tb-e2e")
    experiments = create_example_experiments(api, checkpoint_storage=storage)
    manager = plugins.checkpoint_storage(storage)
    cluster_id = api.get("/api/v1/master")["clusterId"]  # upstream's layout starts with it
    for exp_id in experiments.values():
        assert manager.list_files(experiment_storage_path(exp_id, cluster_id))  # they uploaded

    for name in ("DET_USER", "DET_PASS", "DET_USER_TOKEN", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DET_MASTER", master.url)
    monkeypatch.setenv("DET_CONFIG_DIR", str(tmp_path / "det-config"))
    det = Det(master.url, tmp_path / "det-config", capsys)
    out = det.ok("tensorboard", "start", *map(str, experiments.values()), "--no-browser")
    url = URL_LINE.search(out).group(1)  # type: ignore[union-attr]
    check_scalars(api, url, master.login("determined"), experiments)
    tensorboard_id = re.search(r"/proxy/([0-9a-f-]+)/", url).group(1)  # type: ignore[union-attr]
    det.ok("tensorboard", "kill", tensorboard_id)

    det.ok("experiment", "delete-tb-files", str(experiments["keras"]))
    with pytest.raises(FileNotFoundError):
        manager.list_files(experiment_storage_path(experiments["keras"], cluster_id))
    assert manager.list_files(experiment_storage_path(experiments["pytorch"], cluster_id))
