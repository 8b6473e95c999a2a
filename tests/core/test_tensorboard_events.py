"""det-core's own TensorBoard event files (no TensorFlow or torch): TensorBoard's reader reads
the scalars of metric reports under upstream's names."""

from __future__ import annotations

import pathlib

import pytest

from determined.core._tensorboard_events import MetricEventWriter, crc32c, is_scalar


def _scalars(directory: pathlib.Path) -> dict[str, list[tuple[int, float]]]:
    accumulator_module = pytest.importorskip(
        "tensorboard.backend.event_processing.event_accumulator"
    )
    accumulator = accumulator_module.EventAccumulator(str(directory))
    accumulator.Reload()
    return {
        tag: [(e.step, e.value) for e in accumulator.Scalars(tag)]
        for tag in accumulator.Tags()["scalars"]
    }


def test_crc32c_known_answer() -> None:
    assert crc32c(b"123456789") == 0xE3069283
    assert crc32c(b"") == 0


def test_reports_become_scalars_tensorboard_reads(tmp_path: pathlib.Path) -> None:
    writer = MetricEventWriter(tmp_path)
    writer.on_training(2, {"loss": 0.5, "name": "text", "flag": True, "big": 10**40})
    writer.on_validation(2, {"loss": 0.25, "val_acc": 0.75})
    writer.on_training(4, {"loss": 0.4, "lr": 0.1}, batch_metrics=[{"loss": 0.45}, {"loss": 0.4}])
    writer.on_training(-1, {"loss": float("nan")})
    (event_file,) = tmp_path.iterdir()
    assert event_file.name.startswith("events.out.tfevents.")
    scalars = _scalars(tmp_path)
    assert set(scalars) == {
        "Determined/loss",
        "Determined/big",
        "Determined/val_loss",
        "Determined/val_acc",
        "Determined/lr",
    }
    loss = scalars["Determined/loss"]
    assert [(s, round(v, 4)) for s, v in loss[:3]] == [(2, 0.5), (2, 0.45), (3, 0.4)]
    assert loss[3][0] == -1 and loss[3][1] != loss[3][1]  # NaN kept, a negative step too
    assert scalars["Determined/val_loss"] == [(2, 0.25)]
    assert scalars["Determined/lr"] == [(4, pytest.approx(0.1))]
    assert scalars["Determined/big"][0][1] == pytest.approx(3.4028234663852886e38)


def test_nothing_numeric_writes_no_file(tmp_path: pathlib.Path) -> None:
    MetricEventWriter(tmp_path / "tb").on_training(1, {"note": "x", "ok": False})
    assert not (tmp_path / "tb").exists()
    assert not is_scalar([1.0]) and is_scalar(3) and not is_scalar(None)
