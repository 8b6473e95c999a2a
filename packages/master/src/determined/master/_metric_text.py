"""The text forms of a stored metric row, shared by the metrics writer and its helper processes.

``db._metric_inserts`` writes rows in these forms; ``_core._prepared`` builds them in a helper
process, which must not import the database package (SQLAlchemy and every model): this module
imports nothing of det's.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from operator import itemgetter
from typing import Any

import orjson

UTC = datetime.timezone.utc
_COPY_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


def naive_utc(value: datetime.datetime) -> str:
    """``value`` as SQLAlchemy's ``DateTime`` stores it on SQLite: naive UTC
    ``YYYY-MM-DD HH:MM:SS.ffffff``."""
    if value.tzinfo is not None and value.utcoffset():
        value = value.astimezone(UTC)
    return value.replace(tzinfo=None).isoformat(" ", "microseconds")


def aware(value: datetime.datetime) -> datetime.datetime:
    """A naive time (UTC by the master's convention) made explicit, as COPY's text gets it: the
    server would read a naive value in its session time zone."""
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def copy_text(value: str) -> str:
    """``value`` escaped for a field of PostgreSQL's COPY text format."""
    if "\\" in value or "\t" in value or "\n" in value or "\r" in value:
        return value.translate(_COPY_ESCAPES)
    return value


def copy_json(metrics: Any) -> str:
    """A ``metrics`` column value as a COPY text field (orjson escapes control characters inside
    JSON strings, so only backslashes need doubling)."""
    text = orjson.dumps(metrics).decode()
    return text.replace("\\", "\\\\") if "\\" in text else text


MetricRow = tuple[int, int | None, str, int, datetime.datetime, dict[str, Any], bool]
"""One metric row, in ``db._metric_inserts.COLUMNS`` order (``metrics`` as a dict, encoded when
it is written)."""


def copy_buffer(rows: Iterable[MetricRow]) -> bytes:
    """The COPY text-format payload of ``rows``."""
    lines = []
    group_text: dict[str, str] = {}
    last_time: Any = None
    last_text = ""
    for trial_id, run_id, group, steps, end_time, metrics, archived in rows:
        escaped = group_text.get(group)
        if escaped is None:
            escaped = group_text[group] = copy_text(group)
        text = copy_json(metrics)
        if end_time is not last_time:  # a request's reports usually share one time
            last_time = end_time
            last_text = aware(end_time).isoformat()
        lines.append(
            f"{trial_id}\t{run_id}\t{escaped}\t{steps}\t{last_text}\t{text}\t"
            f"{'t' if archived else 'f'}\n"
        )
    return "".join(lines).encode()


def steps_and_metrics_json(rows: Iterable[MetricRow]) -> str:
    """The JSON array ``[[steps, metrics], ...]`` of rows that share everything else: what
    SQLite's one-statement insert of them reads (``db._metric_inserts``)."""
    return orjson.dumps(list(map(_STEPS_AND_METRICS, rows))).decode()


_STEPS_AND_METRICS = itemgetter(3, 5)
