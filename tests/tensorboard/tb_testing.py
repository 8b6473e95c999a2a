"""Helpers of the TensorBoard tests: synthetic event files, the S3 server's storage config, the
example experiments and the check of what a proxied TensorBoard serves."""

from __future__ import annotations

import os
import pathlib
import re
import socket
import sys
import time
import types
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest
import requests
from e2e.harness import EXAMPLES, MasterAPI

CHROMIUM = "/usr/bin/chromium"
S3_ENV = {
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
}


@dataclass(frozen=True)
class S3Server:
    endpoint_url: str
    bucket: str

    def storage_config(self, prefix: str) -> dict[str, Any]:
        """An ``s3`` checkpoint_storage section on this server (keys given, as upstream allows)."""
        return {
            "type": "s3",
            "bucket": self.bucket,
            "prefix": prefix,
            "endpoint_url": self.endpoint_url,
            "access_key": S3_ENV["AWS_ACCESS_KEY_ID"],
            "secret_key": S3_ENV["AWS_SECRET_ACCESS_KEY"],
        }


def write_scalars(
    directory: str | os.PathLike[str], tag: str, values: Sequence[float], first_step: int = 0
) -> pathlib.Path:
    """One new event file in ``directory`` with ``tag`` at steps first_step, first_step + 1, ...;
    returns its path."""
    sys.modules.setdefault("tensorboard.compat.notf", types.ModuleType("notf"))
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    before = set(pathlib.Path(directory).glob("events.out.tfevents.*"))
    writer = EventFileWriter(os.fspath(directory))
    for offset, value in enumerate(values):
        summary = summary_pb2.Summary(
            value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)]
        )
        writer.add_event(
            event_pb2.Event(wall_time=time.time(), step=first_step + offset, summary=summary)
        )
    writer.close()
    (path,) = set(pathlib.Path(directory).glob("events.out.tfevents.*")) - before
    return path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


URL_LINE = re.compile(r"Tensorboard is running at: (\S+)")


def create_example_experiments(api: MasterAPI, **overrides: Any) -> dict[str, int]:
    """The PyTorch (digits) and Keras (iris) examples, shortened, with ``overrides`` applied."""
    torch_id = api.create_experiment(
        EXAMPLES / "pytorch" / "const.yaml",
        EXAMPLES / "pytorch",
        overrides={
            "name": "tb-pytorch",
            "entrypoint": "python3 train.py --batches 15 --validate-every 10",  # ends off a boundary
            **overrides,
        },
    )
    keras_id = api.create_experiment(
        EXAMPLES / "keras" / "const.yaml",
        EXAMPLES / "keras",
        overrides={
            "name": "tb-keras",
            "entrypoint": "python3 train.py --epochs 3",
            "max_restarts": 0,
            **overrides,
        },
    )
    for exp_id in (torch_id, keras_id):
        assert api.wait_experiment(exp_id, timeout=300) == "STATE_COMPLETED", api.debug(exp_id)
    return {"pytorch": torch_id, "keras": keras_id}


def check_scalars(api: MasterAPI, url: str, token: str, experiments: dict[str, int]) -> None:
    """The proxied TensorBoard at ``url`` holds both experiments' metrics, and refuses strangers."""
    assert requests.get(url + "data/plugin/scalars/tags", timeout=30).status_code == 401
    auth = {"Authorization": f"Bearer {token}"}
    tags = requests.get(url + "data/plugin/scalars/tags", headers=auth, timeout=30).json()

    (torch_trial,) = api.trials(experiments["pytorch"])
    run = f"trial_{torch_trial['id']}"
    assert "Determined/validation_loss" in tags[run], tags
    points = requests.get(
        url + "data/plugin/scalars/scalars",
        params={"run": run, "tag": "Determined/validation_loss"},
        headers=auth,
        timeout=30,
    ).json()
    reported = [
        (int(r["totalBatches"]), api.values(r)["validation_loss"])
        for r in api.metrics(torch_trial["id"], "validation")
    ]
    assert [(step, pytest.approx(value, rel=1e-5)) for _, step, value in points] == reported

    (keras_trial,) = api.trials(experiments["keras"])
    run = f"trial_{keras_trial['id']}/validation"
    assert "epoch_loss" in tags[run], tags
    points = requests.get(
        url + "data/plugin/scalars/scalars",
        params={"run": run, "tag": "epoch_loss"},
        headers=auth,
        timeout=30,
    ).json()
    reported_loss = [
        api.values(r)["val_loss"] for r in api.metrics(keras_trial["id"], "validation")
    ]
    assert [pytest.approx(value, rel=1e-5) for _, _, value in points] == reported_loss
