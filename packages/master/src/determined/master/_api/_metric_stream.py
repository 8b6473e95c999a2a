"""The metric reports of some trials as upstream's ``v1TrialMetrics`` stream, encoded cheaply.

A trial's metrics read is the heaviest common read of the master (a chart polls it; a trial has
thousands of reports). Loading ORM objects, decoding each stored JSON document and encoding it again
cost ~55 µs a row; here rows come as plain tuples with the stored JSON text spliced into the
output unchanged (``orjson.Fragment``). Stored documents are already protojson-safe (NaN/Infinity
kept as strings when written); a document whose text holds a bare NaN/Infinity token, as rows from
before that rule could, is decoded and cleaned instead.

Charts poll: the same trials' metrics are read again every few seconds, mostly unchanged.
:class:`StreamCache` keeps encoded replies and serves one again while a cheap aggregate (how many
unarchived rows, the newest id) says nothing was added, archived or deleted since.
"""

from __future__ import annotations

import collections
import contextlib
import json
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import orjson
from fastapi.responses import Response, StreamingResponse
from sqlalchemy import Text, cast, func, select
from sqlalchemy.orm import Session

from determined.master._wire import clean_float, ts
from determined.master.db import Metric

CHUNK = 1000
"""Reports per streamed line."""
WHOLE_REPLY_BYTES = 16 << 20
"""Replies up to this size are sent as one body; larger ones are streamed line by line."""


def _document(text: str | None) -> Any:
    if text is None:
        return None
    if "NaN" in text or "Infinity" in text:  # maybe a bare token (old rows): decode and clean
        return clean_float(json.loads(text))
    return orjson.Fragment(text)


def _filter(trial_ids: Sequence[int], group: str) -> Any:
    return (
        Metric.trial_id.in_(trial_ids),
        Metric.group == group,
        Metric.archived.is_(False),
    )


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
            .where(*_filter(trial_ids, group))
            .order_by(Metric.trial_id, Metric.total_batches, Metric.id)
        )
    )


class StreamCache:
    """Encoded metric replies by (trials, group), each with the version it was built from, at most
    ``max_bytes`` in all (least recently used go first). One per master."""

    def __init__(self, max_bytes: int = 64 * 1024 * 1024) -> None:
        self.max_bytes = max_bytes
        self._entries: collections.OrderedDict[Any, tuple[Any, list[bytes], int]] = (
            collections.OrderedDict()
        )
        self.size = 0
        """Bytes of the replies kept."""
        self._lock = threading.Lock()
        self._building: dict[Any, tuple[threading.Lock, int]] = {}

    def lines(self, session: Session, trial_ids: Sequence[int], group: str) -> list[bytes]:
        """The reply's lines, from the cache while the rows' version is unchanged."""
        key = (tuple(trial_ids), group)
        count_and_newest = select(func.count(Metric.id), func.max(Metric.id))
        version = tuple(
            session.connection().execute(count_and_newest.where(*_filter(trial_ids, group))).one()
        )
        lines = self.get(key, version)
        if lines is not None:
            return lines
        with self._builder(key):  # readers missing together: one builds, the others reuse it
            lines = self.get(key, version)
            if lines is None:
                lines = list(stream_lines(metric_rows(session, trial_ids, group)))
                self.put(key, version, lines)
        return lines

    @contextlib.contextmanager
    def _builder(self, key: Any) -> Iterator[None]:
        """Held while ``key``'s reply is built; dropped when no one waits for it any more."""
        with self._lock:
            lock, users = self._building.get(key, (threading.Lock(), 0))
            self._building[key] = (lock, users + 1)
        try:
            with lock:
                yield
        finally:
            with self._lock:
                lock, users = self._building[key]
                if users == 1:
                    del self._building[key]
                else:
                    self._building[key] = (lock, users - 1)

    def get(self, key: Any, version: Any) -> list[bytes] | None:
        """The lines stored for ``key`` if they were built from ``version``."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or entry[0] != version:
                return None
            self._entries.move_to_end(key)
            return entry[1]

    def put(self, key: Any, version: Any, lines: list[bytes]) -> None:
        """Keep ``lines`` for ``key``; the least recently used go while over the bound. A reply
        over a quarter of the bound is not kept (one huge reply must not flush all others)."""
        size = sum(len(line) for line in lines)
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self.size -= old[2]
            if size > self.max_bytes // 4:
                return
            self._entries[key] = (version, lines, size)
            self.size += size
            while self.size > self.max_bytes:
                _, (_, _, dropped) = self._entries.popitem(last=False)
                self.size -= dropped

    def __len__(self) -> int:
        return len(self._entries)


def reply(lines: list[bytes]) -> Response:
    """The HTTP reply of built ``lines``.

    A sync iterator given to ``StreamingResponse`` is read through the worker thread pool, one
    thread hop per line, and the reply runs a task that listens for a disconnect: under load each
    hop waits for the interpreter, which made this route's tail latency twice the other reads'.
    The lines are already in memory, so a reply up to :data:`WHOLE_REPLY_BYTES` is one body with
    a length; a larger one is streamed from the event loop (iterating a list does not block)."""
    if sum(len(line) for line in lines) <= WHOLE_REPLY_BYTES:
        return Response(b"".join(lines), media_type="application/json")

    async def each() -> AsyncIterator[bytes]:
        for line in lines:
            yield line

    return StreamingResponse(each(), media_type="application/json")


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
