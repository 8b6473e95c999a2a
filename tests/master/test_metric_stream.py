"""The trial-metrics stream's encoder: stored JSON text is passed through unchanged, and a stored
document holding bare NaN/Infinity tokens (rows written before values were stored protojson-safe)
is decoded and cleaned rather than passed on as invalid JSON."""

from __future__ import annotations

import datetime
import json

from determined.master._api._metric_stream import CHUNK, stream_lines

WHEN = datetime.datetime(2026, 11, 28, 15, 0, 0, 123456)


def _row(i: int, text: str | None) -> tuple:
    return (i, 7, 1, i * 10, WHEN, text, "training", False)


def _decode(lines: list[bytes]) -> list[dict]:
    out = []
    for line in lines:
        assert line.endswith(b"\n")
        out.extend(json.loads(line)["result"]["metrics"])
    return out


def test_documents_pass_through_and_old_tokens_are_cleaned() -> None:
    rows = [
        _row(1, '{"avg_metrics": {"loss": 0.5, "name": "a\\"b"}, "batch_metrics": [{"x": 1}]}'),
        _row(2, '{"avg_metrics": {"loss": NaN, "up": Infinity, "down": -Infinity}}'),
        _row(3, '{"avg_metrics": {"loss": "NaN"}}'),
        _row(4, None),
    ]
    got = _decode(list(stream_lines(rows)))
    assert [r["id"] for r in got] == [1, 2, 3, 4]
    assert got[0]["metrics"] == {
        "avg_metrics": {"loss": 0.5, "name": 'a"b'},
        "batch_metrics": [{"x": 1}],
    }
    assert got[1]["metrics"] == {
        "avg_metrics": {"loss": "NaN", "up": "Infinity", "down": "-Infinity"}
    }
    assert got[2]["metrics"] == {"avg_metrics": {"loss": "NaN"}}
    assert got[3]["metrics"] is None
    assert got[0] | {"metrics": None} == {
        "id": 1,
        "trialId": 7,
        "trialRunId": 1,
        "totalBatches": 10,
        "endTime": "2026-11-28T15:00:00.123456Z",
        "metrics": None,
        "group": "training",
        "archived": False,
    }


def test_chunks_and_empty() -> None:
    rows = [_row(i, '{"avg_metrics": {"loss": 1}}') for i in range(CHUNK * 2 + 3)]
    lines = list(stream_lines(rows))
    assert len(lines) == 3
    assert [r["id"] for r in _decode(lines)] == list(range(CHUNK * 2 + 3))
    assert _decode(list(stream_lines([]))) == []
