"""Database outages answered as 503 (retry later), not as internal errors.

A locked SQLite file (another process holds ``BEGIN EXCLUSIVE`` past the busy timeout), a PostgreSQL
server that restarts, or a full disk make SQLAlchemy raise ``OperationalError`` (or a DBAPI error whose
connection was invalidated). Nothing was committed then, so the request can be sent again: clients
(a trial's session among them) retry a 503, and the message says what is wrong.
"""

from __future__ import annotations

import functools

from sqlalchemy import exc as sa_exc

from determined.master._wire import APIError

RETRY_AFTER_S = 2
"""The ``Retry-After`` a 503 for a database outage carries."""


def unavailable(error: BaseException) -> APIError | None:
    """A 503 naming the database problem when ``error`` is an outage (nothing committed), else
    ``None``. Also for the drivers' own ``OperationalError``: the hot bulk writes talk to the
    driver directly (PostgreSQL's COPY), and SQLAlchemy does not wrap what those raise."""
    if (
        isinstance(error, sa_exc.OperationalError)
        or (isinstance(error, sa_exc.DBAPIError) and error.connection_invalidated)
        or isinstance(error, _driver_outages())
    ):
        cause = getattr(error, "orig", None) or error
        detail = str(cause).strip().splitlines()[0] if str(cause).strip() else type(cause).__name__
        return APIError(503, f"the database is unavailable, retry later: {detail}")
    return None


@functools.cache
def _driver_outages() -> tuple[type[BaseException], ...]:
    """The DBAPI drivers' ``OperationalError`` classes (psycopg only where it is installed)."""
    import sqlite3

    found: list[type[BaseException]] = [sqlite3.OperationalError]
    try:
        import psycopg
    except ImportError:
        pass
    else:
        found.append(psycopg.OperationalError)
    return tuple(found)
