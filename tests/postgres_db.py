"""The local PostgreSQL server for tests: started on demand, one fresh database per test.

CI machines have PostgreSQL 15 installed but not running; the first test that needs it starts it.
Tests import this module as ``postgres_db`` (the root pytest config puts tests/ on the path).
"""

from __future__ import annotations

import fcntl
import pathlib
import shutil
import subprocess
import tempfile
import time
import uuid

import pytest


def available() -> bool:
    return (
        shutil.which("pg_ctlcluster") is not None
        or pathlib.Path("/usr/lib/postgresql/15/bin/postgres").exists()
    )


_PG_READY = False


def _ensure_postgres() -> None:
    """Start the local PostgreSQL 15 cluster and a login role for tests (idempotent).

    pytest-xdist's workers come here at once on a fresh machine: a file lock makes them take
    turns, else two create the role together and one fails on the duplicate."""
    global _PG_READY
    if _PG_READY:
        return
    if not available():
        pytest.skip("PostgreSQL is not installed on this machine")
    with open(_LOCK_PATH, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            _start_and_add_role()
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    _PG_READY = True


_LOCK_PATH = pathlib.Path(tempfile.gettempdir()) / "det-tests-postgres.lock"


def _start_and_add_role() -> None:
    status = subprocess.run(["pg_ctlcluster", "15", "main", "status"], capture_output=True)
    if status.returncode != 0:
        subprocess.run(["pg_ctlcluster", "15", "main", "start"], capture_output=True)
    deadline = time.monotonic() + 30
    while True:
        ready = subprocess.run(
            ["su", "postgres", "-c", "psql -tAc 'SELECT 1'"], capture_output=True, text=True
        )
        if ready.returncode == 0:
            break
        if time.monotonic() > deadline:
            pytest.fail(f"PostgreSQL did not start: {ready.stderr}")
        time.sleep(0.2)
    subprocess.run(
        [
            "su",
            "postgres",
            "-c",
            "psql -tAc \"DO \\$\\$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname='dettest')"
            " THEN CREATE ROLE dettest LOGIN CREATEDB PASSWORD 'dettest'; END IF; END \\$\\$;\"",
        ],
        capture_output=True,
        check=True,
    )


def postgres_url() -> str:
    """A fresh, empty PostgreSQL database for one test."""
    _ensure_postgres()
    name = "det_" + uuid.uuid4().hex[:12]
    subprocess.run(
        ["su", "postgres", "-c", f"psql -tAc 'CREATE DATABASE {name} OWNER dettest'"],
        capture_output=True,
        check=True,
    )
    return f"postgresql+psycopg://dettest:dettest@127.0.0.1:5432/{name}"


def drop_database(url: str) -> None:
    """Drop the database of ``url`` (a URL from :func:`postgres_url`)."""
    name = url.rsplit("/", 1)[1]
    subprocess.run(
        ["su", "postgres", "-c", f"psql -tAc 'DROP DATABASE IF EXISTS {name} WITH (FORCE)'"],
        capture_output=True,
    )
