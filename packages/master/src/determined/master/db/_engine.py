"""The database engine: SQLite (WAL) or PostgreSQL, and Alembic migrations run at start-up."""

from __future__ import annotations

import contextlib
import json
import logging
import pathlib
import sqlite3
import threading
from collections.abc import Iterator
from typing import Any

import orjson
import sqlalchemy
from sqlalchemy import event
from sqlalchemy.orm import Session, sessionmaker

logger = logging.getLogger("determined.master")

MIGRATIONS_DIR = pathlib.Path(__file__).parent / "migrations"


POSTGRES_POOL: dict[str, Any] = {
    "pool_size": 20,
    "max_overflow": 20,
    "pool_timeout": 30,
    "pool_recycle": 3600,
    "pool_pre_ping": True,
    "pool_use_lifo": True,
}
"""SQLAlchemy pool settings on PostgreSQL (docs/postgresql.md): enough connections for the API's
worker threads plus the metrics writer and the event dispatcher; a checked-out connection is pinged
first (a restarted server costs one reconnect, not a failed request) and the most recently used one
is reused (idle connections beyond the busy set time out on the server side instead of being cycled)."""


SQLITE_POOL: dict[str, Any] = {"pool_size": 48, "max_overflow": 16, "pool_use_lifo": True}
"""SQLAlchemy pool settings on SQLite: a connection for each of the API's worker threads (anyio's
default limit is 40) plus the metrics writer, the event dispatcher and the services. With the
default pool (5, overflow 10) concurrent reads beyond 5 opened a connection each (a file open and
four pragmas) and closed it after the request, and beyond 15 waited for one: under 50 readers and
20 reporting trials that was the tail of read latency. The most recently used connection is
reused first, so a quiet master keeps few connections (and their page caches) warm."""


def _json_text(value: Any) -> str:
    """JSON columns on PostgreSQL: orjson (several times faster than ``json.dumps``; NaN/Infinity,
    which PostgreSQL's ``json`` type refuses, become ``null``), ``json.dumps`` for what orjson
    cannot encode (integers beyond 64 bits, non-string keys of unusual types)."""
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:
        return json.dumps(value)


def _json_value(text: str | bytes) -> Any:
    """JSON columns read back: orjson (several times faster than ``json.loads``), the standard
    library for what orjson refuses and ``json.dumps`` may have written on SQLite (NaN and
    Infinity literals, integers beyond 64 bits)."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


class Database:
    """An engine plus a session factory.

    SQLite gets WAL journaling, ``synchronous=NORMAL`` and a busy timeout; since SQLite allows one
    writer at a time, :meth:`write` additionally serialises writers of this process behind a lock
    (a cheap, predictable alternative to retrying on ``database is locked``).
    """

    def __init__(self, url: str, *, busy_timeout_s: float = 30.0) -> None:
        self.url = url
        self.is_sqlite = url.startswith("sqlite")
        kwargs: dict[str, Any] = {"future": True, "json_deserializer": _json_value}
        if self.is_sqlite:
            path = url.split("///", 1)[1] if "///" in url else ""
            kwargs["connect_args"] = {"check_same_thread": False, "timeout": busy_timeout_s}
            if path and path != ":memory:":
                pathlib.Path(path).parent.mkdir(parents=True, exist_ok=True)
                kwargs.update(SQLITE_POOL)
        else:
            kwargs.update(POSTGRES_POOL)
            kwargs["json_serializer"] = _json_text
        self.engine = sqlalchemy.create_engine(url, **kwargs)
        if self.is_sqlite:
            busy_ms = int(busy_timeout_s * 1000)
            event.listen(
                self.engine,
                "connect",
                lambda connection, record: _sqlite_pragmas(connection, record, busy_ms),
            )
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        self._write_lock = threading.RLock()
        # SQLite: a writer queued behind others that each wait out the busy timeout on a file
        # another process locked would wait their sum; it waits for them at most that timeout too.
        self._write_lock_wait_s = busy_timeout_s if self.is_sqlite else -1.0

    def migrate(self) -> None:
        """Bring the schema to the newest Alembic revision (``alembic upgrade head``)."""
        from alembic import command
        from alembic.config import Config

        cfg = Config()
        cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
        if not self.is_sqlite:
            with self.engine.begin() as connection:
                cfg.attributes["connection"] = connection
                command.upgrade(cfg, "head")
            return
        # SQLite: Alembic's batch mode rebuilds a table (copy, DROP, rename); with foreign keys on,
        # the DROP would cascade into every referencing table (runs of experiments...). Foreign keys
        # can only be switched outside a transaction, so off first, checked and on again after.
        with self.engine.connect() as connection:
            connection.exec_driver_sql("PRAGMA foreign_keys=OFF")
            connection.commit()
            try:
                cfg.attributes["connection"] = connection
                command.upgrade(cfg, "head")
                connection.commit()
                broken = connection.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
                if broken:
                    logger.warning("foreign keys broken after the migrations: %s", broken[:10])
            finally:
                connection.rollback()
                connection.exec_driver_sql("PRAGMA foreign_keys=ON")
                connection.commit()

    @contextlib.contextmanager
    def read(self) -> Iterator[Session]:
        """A session for reads; objects stay usable (detached, loaded) after the block."""
        session = self._sessions()
        try:
            yield session
        finally:
            session.close()

    @contextlib.contextmanager
    def write(self) -> Iterator[Session]:
        """A session committed at the end of the block (rolled back on an exception), one block
        of the process at a time.

        On SQLite a block that cannot start within the busy timeout (the writers before it are
        waiting for a file another process locked) raises the ``database is locked`` error SQLite
        itself would, which the API answers with a 503: so a write is refused after at most twice
        the busy timeout, however many writers queue."""
        if not self._write_lock.acquire(timeout=self._write_lock_wait_s):
            raise _locked(self._write_lock_wait_s)
        try:
            with self.concurrent_write() as session:
                yield session
        finally:
            self._write_lock.release()

    @contextlib.contextmanager
    def concurrent_write(self) -> Iterator[Session]:
        """:meth:`write` without the process-wide write lock: for writers that order themselves
        against the others through the database's row locks (PostgreSQL; on SQLite the file lock
        would make such a writer wait for, or fail on, any other)."""
        session = self._sessions()
        try:
            yield session
            session.commit()
        except BaseException:
            session.rollback()
            raise
        finally:
            session.close()

    def close(self) -> None:
        """Dispose of every pooled connection."""
        self.engine.dispose()


def _locked(waited_s: float) -> sqlalchemy.exc.OperationalError:
    """The error of a write that waited ``waited_s`` for this master's earlier writers, shaped
    like SQLite's own ``database is locked`` so every handler of that treats it the same."""
    cause = sqlite3.OperationalError(
        f"database is locked (this master's earlier writes held it for {waited_s:g} s)"
    )
    return sqlalchemy.exc.OperationalError("BEGIN", None, cause)


def _sqlite_pragmas(dbapi_connection: Any, _record: Any, busy_timeout_ms: int = 30000) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()
