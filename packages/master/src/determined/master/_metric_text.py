"""The text forms of a stored metric row, shared by the metrics writer and its helper processes.

``db._metric_inserts`` writes rows in these forms; ``_core._prepared`` builds them in a helper
process, which must not import the database package (SQLAlchemy and every model): this module
imports nothing of det's.
"""

from __future__ import annotations

import datetime
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
