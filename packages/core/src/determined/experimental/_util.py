"""Small pieces the SDK objects share: sort order, pagination, timestamps, enum coercion."""

from __future__ import annotations

import datetime
import enum
import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

E = TypeVar("E", bound=enum.Enum)


class OrderBy(enum.Enum):
    """Whether a sorted list is in ascending or descending order."""

    ASCENDING = "ORDER_BY_ASC"
    ASC = "ORDER_BY_ASC"
    DESCENDING = "ORDER_BY_DESC"
    DESC = "ORDER_BY_DESC"


def enum_value(value: Any, kind: type[E], argument: str) -> str:
    """The wire value of ``value`` (a member of ``kind`` or its name/value as a string).

    Raises:
        ValueError: naming ``argument`` and the accepted members.
    """
    if isinstance(value, kind):
        return str(value.value)
    if isinstance(value, str):
        for member in kind:
            if value in (member.name, member.value):
                return str(member.value)
    names = ", ".join(m.name for m in kind)
    raise ValueError(f"{argument}: expected a {kind.__name__} ({names}), got {value!r}")


def member(kind: type[E], value: Any) -> E | None:
    """The member of ``kind`` whose value is ``value`` (None for a value this SDK does not know)."""
    try:
        return kind(value)
    except ValueError:
        return None


def read_paginated(
    fetch: Callable[[int], dict[str, Any]], key: str, *, single: bool = False
) -> Iterator[Any]:
    """Yield ``page[key]`` items of every page ``fetch(offset)`` returns (one page if ``single``)."""
    offset = 0
    while True:
        page = fetch(offset) or {}
        items = page.get(key) or []
        yield from items
        info = page.get("pagination") or {}
        end, total = info.get("endIndex"), info.get("total")
        if single or not items or end is None or total is None or int(end) >= int(total):
            return
        offset = int(end)


def parse_time(value: Any) -> datetime.datetime | None:
    """An RFC 3339 timestamp from the master as an aware datetime (None when absent)."""
    if not value:
        return None
    text = str(value).replace("Z", "+00:00")
    if "." in text:
        head, _, tail = text.partition(".")
        digits = "".join(c for c in tail if c.isdigit())
        zone = tail[len(digits) :]
        text = f"{head}.{digits[:6]}{zone}"
    return datetime.datetime.fromisoformat(text)


def deprecated(old: str, new: str) -> None:
    """Upstream's FutureWarning for a renamed SDK call."""
    warnings.warn(
        f"{old} has been deprecated and will be removed in a future version; use {new} instead.",
        FutureWarning,
        stacklevel=3,
    )


class Poller:
    """Sleeps between polls until a deadline; ``Ctrl-C`` interrupts the sleep at once."""

    def __init__(self, interval: float, timeout: float | None, what: str) -> None:
        if interval <= 0:
            raise ValueError(f"interval: must be > 0 seconds, got {interval!r}")
        self.interval = interval
        self.what = what
        self.start = time.monotonic()
        self.deadline = None if timeout is None else self.start + timeout

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def sleep(self) -> None:
        """Wait one interval; TimeoutError once the deadline passed."""
        now = time.monotonic()
        if self.deadline is not None and now >= self.deadline:
            raise TimeoutError(f"timed out after {self.elapsed:.0f}s waiting for {self.what}")
        pause = self.interval
        if self.deadline is not None:
            pause = min(pause, max(self.deadline - now, 0.0))
        time.sleep(pause)
