"""TensorBoard event files of reported metrics, written without TensorFlow or torch.

With ``tensorboard_mode=AUTO`` (upstream's behaviour) every report of training and validation
metrics also becomes scalars in an event file under ``get_tensorboard_path()``: a training metric
``loss`` as ``Determined/loss`` (batch metrics at their own batch), a validation metric as
``Determined/val_<name>`` unless its name starts with ``val``. Only numbers become scalars.

An event file is TensorFlow's record format: per record, the data length (uint64), its masked
CRC-32C, the data (a serialized ``Event`` protocol buffer) and the data's masked CRC-32C. The few
protobuf fields needed (``wall_time``, ``step``, ``file_version``, ``summary.value.tag``,
``summary.value.simple_value``) are encoded here.
"""

from __future__ import annotations

import math
import numbers
import os
import pathlib
import socket
import struct
import time
from collections.abc import Mapping
from typing import Any


def _crc32c_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_CRC_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli) of ``data``."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _CRC_TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _masked_crc(data: bytes) -> int:
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def record(data: bytes) -> bytes:
    """One record of an event file holding ``data``."""
    header = struct.pack("<Q", len(data))
    return (
        header
        + struct.pack("<I", _masked_crc(header))
        + data
        + struct.pack("<I", _masked_crc(data))
    )


def _varint(value: int) -> bytes:
    value &= 0xFFFFFFFFFFFFFFFF  # int64 as protobuf encodes it (negatives take 10 bytes)
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _field(number: int, wire_type: int) -> bytes:
    return _varint((number << 3) | wire_type)


def _length_delimited(number: int, payload: bytes) -> bytes:
    return _field(number, 2) + _varint(len(payload)) + payload


def event(wall_time: float, step: int | None = None, **kind: Any) -> bytes:
    """A serialized ``Event``: ``file_version=str`` or ``scalars={tag: value}``."""
    out = _field(1, 1) + struct.pack("<d", wall_time)
    if step is not None:
        out += _field(2, 0) + _varint(int(step))
    if "file_version" in kind:
        out += _length_delimited(3, str(kind["file_version"]).encode())
    if "scalars" in kind:
        summary = b"".join(
            _length_delimited(
                1,
                _length_delimited(1, tag.encode()) + _field(2, 5) + struct.pack("<f", value),
            )
            for tag, value in kind["scalars"].items()
        )
        out += _length_delimited(5, summary)
    return out


def is_scalar(value: Any) -> bool:
    """Whether ``value`` is a number TensorBoard can plot (not a bool)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, numbers.Real):
        return True
    item = getattr(value, "item", None)  # numpy / torch scalars, without importing them
    shape = getattr(value, "shape", None)
    if callable(item) and shape in ((), None):
        try:
            return isinstance(item(), numbers.Real) and not isinstance(item(), bool)
        except Exception:
            return False
    return False


def _as_float(value: Any) -> float:
    item = getattr(value, "item", None)
    number = float(item() if callable(item) and not isinstance(value, numbers.Real) else value)
    if math.isinf(number) or math.isnan(number):
        return number
    return max(min(number, 3.4028234663852886e38), -3.4028234663852886e38)  # float32 range


class ScalarEventWriter:
    """Appends scalars to one event file in ``directory`` (created on the first write)."""

    def __init__(self, directory: pathlib.Path) -> None:
        self.directory = pathlib.Path(directory)
        self.path: pathlib.Path | None = None

    def add_scalars(self, step: int, scalars: Mapping[str, Any]) -> None:
        """Write the numeric ``scalars`` (tag -> value) at ``step``; others are skipped."""
        values = {tag: _as_float(v) for tag, v in scalars.items() if is_scalar(v)}
        if not values:
            return
        now = time.time()
        data = b""
        if self.path is None:
            self.directory.mkdir(parents=True, exist_ok=True)
            name = f"events.out.tfevents.{int(now)}.{socket.gethostname()}.{os.getpid()}.det"
            self.path = self.directory / name
            data += record(event(now, file_version="brain.Event:2"))
        data += record(event(now, step, scalars=values))
        with open(self.path, "ab") as out:
            out.write(data)


class MetricEventWriter:
    """Upstream's names for reported metrics in TensorBoard (its ``BatchMetricWriter``)."""

    def __init__(self, directory: pathlib.Path) -> None:
        self.writer = ScalarEventWriter(directory)

    def on_training(
        self,
        steps_completed: int,
        metrics: Mapping[str, Any],
        batch_metrics: list[dict[str, Any]] | None = None,
    ) -> None:
        """Training metrics: each batch metric at its batch, the other averages at the end."""
        seen: set[str] = set()
        for index, batch in enumerate(batch_metrics or []):
            step = steps_completed - len(batch_metrics or []) + index
            self.writer.add_scalars(step, {f"Determined/{k}": v for k, v in batch.items()})
            seen.update(batch)
        rest = {f"Determined/{k}": v for k, v in metrics.items() if k not in seen}
        self.writer.add_scalars(steps_completed, rest)

    def on_validation(self, steps_completed: int, metrics: Mapping[str, Any]) -> None:
        """Validation metrics, named ``val_<name>`` unless they start with ``val``."""
        named = {
            f"Determined/{k if k.startswith('val') else 'val_' + k}": v for k, v in metrics.items()
        }
        self.writer.add_scalars(steps_completed, named)
