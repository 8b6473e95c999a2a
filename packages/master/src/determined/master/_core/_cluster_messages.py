"""Cluster-wide messages: one notice from an admin, shown to every user while it is active.

Setting a message ends the one before it; clearing ends the current one. ``GET /api/v1/master``
carries the active message (started, not ended) so the web UI and the CLI can show it.
"""

from __future__ import annotations

import dataclasses
import datetime
import re
import threading

from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from determined.master._wire import APIError, as_utc
from determined.master.db import ClusterMessage, Database, utcnow

MAX_LENGTH = 250
"""The longest message, in characters (as upstream)."""

_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
    "d": 86400.0,
    "w": 604800.0,
}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h|d|w)")


def parse_duration(text: str) -> datetime.timedelta:
    """A Go-style duration (``90m``, ``1h30m``, ``24h``) or one with days and weeks (``5d``,
    ``2w``), which upstream's help promised but its parser refused.

    Raises:
        APIError: 400 for anything else or a negative duration.
    """
    value = text.strip()
    if not value or value.startswith("-"):
        raise APIError(
            400, f"duration: must be a positive duration like 24h, 5d or 2w, got {text!r}"
        )
    position, seconds = 0, 0.0
    for match in _PART.finditer(value):
        if match.start() != position:
            break
        seconds += float(match.group(1)) * _UNITS[match.group(2)]
        position = match.end()
    if position != len(value):
        raise APIError(
            400, f"duration: must be a positive duration like 24h, 5d or 2w, got {text!r}"
        )
    return datetime.timedelta(seconds=seconds)


def _utc(value: datetime.datetime | None) -> datetime.datetime | None:
    """``value`` in UTC (SQLite stores times without their offset)."""
    aware = as_utc(value)
    return aware.astimezone(datetime.timezone.utc) if aware is not None else None


@dataclasses.dataclass(frozen=True)
class Notice:
    """A cluster message as the routes serialize it."""

    message: str
    start_time: datetime.datetime
    end_time: datetime.datetime | None
    created_time: datetime.datetime


def _notice(row: ClusterMessage) -> Notice:
    start = as_utc(row.start_time)
    created = as_utc(row.created_time)
    assert start is not None and created is not None
    return Notice(row.message, start, as_utc(row.end_time), created)


class ClusterMessages:
    """Set, clear and read the cluster-wide message."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._newest_row: tuple[Notice | None] | None = None
        """The newest message as stored (a 1-tuple; None until read): ``GET /api/v1/master``
        shows it on every call, and only :meth:`set` and :meth:`clear` change it."""
        self._generation = 0
        """Bumped by every change once committed: a read that raced a change is not cached."""
        self._cache_lock = threading.Lock()

    def set(
        self,
        message: str,
        user_id: int,
        *,
        start_time: datetime.datetime | None = None,
        end_time: datetime.datetime | None = None,
        duration: str | None = None,
    ) -> Notice:
        """Make ``message`` the cluster message (the previous one ends now).

        Raises:
            APIError: 400 for a message over :data:`MAX_LENGTH` characters, both an end time and a
                duration, or an end before the start or in the past.
        """
        if len(message) > MAX_LENGTH:
            raise APIError(
                400, f"message: must be at most {MAX_LENGTH} characters; got {len(message)}"
            )
        if end_time is not None and duration is not None:
            raise APIError(400, "endTime and duration are mutually exclusive")
        now = utcnow()
        start = _utc(start_time) or now
        end = _utc(end_time)
        if duration is not None:
            end = start + parse_duration(duration)
        if end is not None and end < start:
            raise APIError(400, "end time must be after start time")
        if end is not None and end < now:
            raise APIError(400, "end time must be after current time")
        with self._db.write() as session:
            self._end_current(session, now)
            row = ClusterMessage(
                created_by=user_id,
                message=message,
                start_time=start,
                end_time=end,
                created_time=now,
            )
            session.add(row)
            session.flush()
            notice = _notice(row)
        self._changed()
        return notice

    def clear(self) -> None:
        """End the current message (no-op when there is none)."""
        with self._db.write() as session:
            self._end_current(session, utcnow())
        self._changed()

    def _changed(self) -> None:
        with self._cache_lock:
            self._generation += 1
            self._newest_row = None

    def current(self) -> Notice | None:
        """The newest message that has not ended (it may start later): what admins see."""
        return self._newest(active_only=False)

    def active(self) -> Notice | None:
        """The newest message when it has started and not ended: what users are shown."""
        return self._newest(active_only=True)

    def _newest(self, *, active_only: bool) -> Notice | None:
        now = utcnow()
        cached = self._newest_row
        if cached is None:
            generation = self._generation
            with self._db.read() as session:
                stmt = select(ClusterMessage).order_by(
                    ClusterMessage.created_time.desc(), ClusterMessage.id.desc()
                )
                row = session.scalars(stmt.limit(1)).first()
                cached = (_notice(row) if row is not None else None,)
            with self._cache_lock:
                if generation == self._generation:
                    self._newest_row = cached
        (notice,) = cached
        if notice is None:
            return None
        if notice.end_time is not None and notice.end_time <= now:
            return None
        if active_only and notice.start_time > now:
            return None
        return notice

    @staticmethod
    def _end_current(session: Session, now: datetime.datetime) -> None:
        stmt = (
            update(ClusterMessage)
            .where(or_(ClusterMessage.end_time.is_(None), ClusterMessage.end_time >= now))
            .values(end_time=now)
        )
        session.execute(stmt)
