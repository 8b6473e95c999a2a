"""Credentials a transaction ends without loading their rows, for caches of resolved tokens.

A cache of resolved tokens (the API's ``AuthCache``) learns from ORM flushes which users, sessions
and allocations changed. A write made by a plain UPDATE, with no row loaded, leaves no trace in
a flush, so the code that makes it notes here what stops authenticating; the cache drops those
entries once the transaction commits (and forgets the note when it rolls back).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from sqlalchemy.orm import Session

_KEY = "det.revoked"


@dataclass
class Revoked:
    """Token digests and allocation ids that stop authenticating at a commit."""

    digests: set[str] = field(default_factory=set)
    allocation_ids: set[str] = field(default_factory=set)


def note_revoked(
    session: Session, *, digests: Iterable[str] = (), allocation_ids: Iterable[str] = ()
) -> None:
    """Record that ``session``'s transaction revokes these token digests and allocations."""
    revoked = session.info.setdefault(_KEY, Revoked())
    revoked.digests.update(digests)
    revoked.allocation_ids.update(allocation_ids)


def take_revoked(session: Session) -> Revoked | None:
    """What ``session``'s transaction revoked (and forget it), or None."""
    revoked: Revoked | None = session.info.pop(_KEY, None)
    return revoked
