"""The metric reports of some trials as upstream's ``v1TrialMetrics`` stream, encoded cheaply.

A trial's metrics read is the heaviest common read of the master (a chart polls it; a trial has
thousands of reports). Loading ORM objects, decoding each stored JSON document and encoding it again
cost ~55 µs a row; here rows come as plain tuples with the stored JSON text spliced into the
output unchanged (``orjson.Fragment``). Stored documents are already protojson-safe (NaN/Infinity
kept as strings when written); a document whose text holds a bare NaN/Infinity token, as rows from
before that rule could, is decoded and cleaned instead.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

import orjson
from sqlalchemy import Text, cast, select
from sqlalchemy.orm import Session

from determined.master._wire import clean_float, ts
from determined.master.db import Metric

CHUNK = 1000
"""Reports per streamed line."""


def _document(text: str | None) -> Any:
    if text is None:
        return None
    if "NaN" in text or "Infinity" in text:  # maybe a bare token (old rows): decode and clean
        return clean_float(json.loads(text))
    return orjson.Fragment(text)


def metric_rows(session: Session, trial_ids: Sequence[int], group: str) -> list[Any]:
    """The unarchived reports of ``group`` for ``trial_ids`` in (trial, batches, id) order."""
    # Through the Core connection: an ORM-enabled select of columns still pays ORM row loading.
    return list(
        session.connection().execute(
            select(
                Metric.id,
                Metric.trial_id,
                Metric.trial_run_id,
                Metric.total_batches,
                Metric.end_time,
                cast(Metric.metrics, Text),
                Metric.group,
                Metric.archived,
            )
            .where(
                Metric.trial_id.in_(trial_ids), Metric.group == group, Metric.archived.is_(False)
            )
            .order_by(Metric.trial_id, Metric.total_batches, Metric.id)
        )
    )


def stream_lines(rows: list[Any]) -> Iterator[bytes]:
    """``{"result": {"metrics": [...]}}`` lines of at most :data:`CHUNK` reports each."""
    for start in range(0, len(rows), CHUNK):
        chunk = [
            {
                "id": row_id,
                "trialId": trial_id,
                "trialRunId": run_id,
                "totalBatches": batches,
                "endTime": ts(end_time),
                "metrics": _document(text),
                "group": group,
                "archived": archived,
            }
            for row_id, trial_id, run_id, batches, end_time, text, group, archived in rows[
                start : start + CHUNK
            ]
        ]
        yield orjson.dumps({"result": {"metrics": chunk}}) + b"\n"
    if not rows:
        yield b'{"result": {"metrics": []}}\n'
