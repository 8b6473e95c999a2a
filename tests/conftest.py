"""The master fixtures every test directory shares: one way to get a running det master.

- ``make_master(db=None, *, process=False, data_dir=None, **config)`` (function scope) and
  ``make_module_master`` (module scope): factories of started masters (``running_master``), all
  stopped at teardown. A handle has ``url``, ``data_dir``, ``login()``/``session()``/``api()``,
  ``stop()`` and ``restart()``; ``process=True`` runs the master in a subprocess
  (``master_process.MasterProcess``, which also has ``kill()``), for tests that crash it.
- Databases: ``db_url`` and ``module_db_url`` are parametrised over SQLite and PostgreSQL (a fresh
  database, dropped afterwards; the ``postgres`` mark), ``sqlite_url`` is SQLite only. Request the
  database fixture before the factory, so that the master stops before its database is dropped.
- Ready-made: ``master`` (fresh, SQLite and PostgreSQL), ``sqlite_master`` (fresh, SQLite),
  ``module_master``/``det_master`` (one SQLite master per test module, for tests that only look at
  their own experiments), ``master_url`` and ``api`` (a ``MasterAPI`` logged in as ``determined``)
  of ``sqlite_master``.

Every master listens on a free port of 127.0.0.1 and has 4 slots unless told otherwise.
Directories override these names where they need something else (a module-scoped ``master`` in
tests/sdk, 8 slots in tests/e2e).
"""

from __future__ import annotations

import pathlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest
from postgres_db import drop_database, postgres_url
from running_master import MasterFactory

if TYPE_CHECKING:
    from e2e.harness import MasterAPI

DATABASES = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


def _database(kind: str, directory: pathlib.Path) -> Iterator[str]:
    """A SQLite file in ``directory``, or a fresh PostgreSQL database dropped afterwards."""
    if kind == "sqlite":
        yield f"sqlite:///{directory / 'det.sqlite'}"
        return
    url = postgres_url()
    try:
        yield url
    finally:
        drop_database(url)


@pytest.fixture(params=DATABASES)
def db_url(request: pytest.FixtureRequest, tmp_path: pathlib.Path) -> Iterator[str]:
    """A database URL for one test: SQLite, then PostgreSQL."""
    yield from _database(request.param, tmp_path)


@pytest.fixture(scope="module", params=DATABASES)
def module_db_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A database URL shared by the tests of a module: SQLite, then PostgreSQL."""
    yield from _database(request.param, tmp_path_factory.mktemp("db"))


@pytest.fixture
def sqlite_url(tmp_path: pathlib.Path) -> str:
    """A SQLite database file in the test's tmp_path."""
    return f"sqlite:///{tmp_path / 'det.sqlite'}"


@pytest.fixture
def make_master(tmp_path: pathlib.Path) -> Iterator[MasterFactory]:
    """``make_master(db=None, *, process=False, data_dir=None, **config)``: a started master whose
    data dir is under tmp_path (see ``running_master.MasterFactory``); stopped at teardown."""
    factory = MasterFactory(tmp_path)
    yield factory
    factory.stop_all()


@pytest.fixture(scope="module")
def make_module_master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MasterFactory]:
    """``make_master`` for module-scoped fixtures: masters live until the module's tests end."""
    factory = MasterFactory(tmp_path_factory.mktemp("masters"))
    yield factory
    factory.stop_all()


@pytest.fixture
def master(db_url: str, make_master: MasterFactory) -> Iterator[Any]:
    """A fresh master on SQLite, then on PostgreSQL (stopped before its database is dropped, even
    when the test asked for ``make_master`` first)."""
    handle = make_master(db_url)
    yield handle
    handle.stop()


@pytest.fixture
def sqlite_master(sqlite_url: str, make_master: MasterFactory) -> Any:
    """A fresh master on SQLite (tests that do not touch the database in interesting ways)."""
    return make_master(sqlite_url)


@pytest.fixture(scope="module")
def module_master(make_module_master: MasterFactory) -> Any:
    """One SQLite master shared by the tests of a module (each looks only at its own ids)."""
    return make_module_master()


@pytest.fixture(scope="module")
def det_master(module_master: Any) -> Any:
    """The module's master, by the name the CLI tests use."""
    return module_master


@pytest.fixture
def master_url(sqlite_master: Any) -> str:
    """The URL of a fresh SQLite master."""
    return str(sqlite_master.url)


@pytest.fixture
def api(sqlite_master: Any) -> MasterAPI:
    """A client of a fresh SQLite master (``e2e.harness.MasterAPI``), logged in as ``determined``."""
    return sqlite_master.api()  # type: ignore[no-any-return]
