"""Helpers of the TensorBoard tests: synthetic event files and the S3 server's storage config."""

from __future__ import annotations

import os
import pathlib
import socket
import sys
import time
import types
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

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
