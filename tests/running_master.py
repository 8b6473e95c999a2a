"""A running det master for tests, behind one interface whether it runs in this process or in a
subprocess, and the factory the root ``conftest.py`` fixtures hand out.

Tests import this module as ``running_master`` (the root pytest config puts tests/ on the path).
Every handle has ``url``, ``data_dir``, the login helpers of :class:`LoginHelpers`, ``stop()``
(idempotent) and ``restart()`` (the same data dir, database and port: clients built on ``url`` keep
working). :class:`InProcessMaster` also exposes the wrapped ``Master``'s attributes (``db``,
``manager``, ``rm``, ...); the subprocess handle, ``master_process.MasterProcess``, adds ``kill()``.
"""

from __future__ import annotations

import pathlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from e2e.harness import MasterAPI

    from determined.client import Session
    from determined.master import Master


class LoginHelpers:
    """Logins against ``self.url`` (set by the subclass): a token, a client ``Session``, or the
    end-to-end harness's ``MasterAPI``. The built-in users are ``admin`` and ``determined``."""

    url: str

    def login(self, username: str = "admin", password: str = "") -> str:
        """A session token of ``username``."""
        from determined.client import Session

        body = {"username": username, "password": password}
        return str(Session(self.url).request("POST", "/api/v1/auth/login", body=body)["token"])

    def session(self, username: str = "admin", password: str = "") -> Session:
        """A ``determined.client.Session`` logged in as ``username``."""
        from determined.client import Session

        return Session(self.url, self.login(username, password))

    def api(self, username: str = "determined", password: str = "") -> MasterAPI:
        """The end-to-end harness's client (``e2e.harness.MasterAPI``) logged in as ``username``."""
        from e2e.harness import MasterAPI

        return MasterAPI(self.url, username, password)


class InProcessMaster(LoginHelpers):
    """A ``determined.master.Master`` started in this process on a loopback port.

    Attributes the handle does not define (``db``, ``manager``, ``rm``, ``config``, ...) are the
    current ``Master``'s, so tests that poke the master's internals read them through the handle.
    """

    def __init__(self, **config: Any) -> None:
        config.setdefault("host", "127.0.0.1")
        config.setdefault("port", 0)
        self._config = config
        self.master = self._start(config)
        self._running = True

    @staticmethod
    def _start(config: dict[str, Any]) -> Master:
        from determined.master import Master, MasterConfig

        master = Master(MasterConfig(**config))
        master.start()
        return master

    @property
    def url(self) -> str:  # type: ignore[override]
        return str(self.master.url)

    @property
    def data_dir(self) -> pathlib.Path:
        return pathlib.Path(self.master.data_dir)

    @property
    def running(self) -> bool:
        """Started and not stopped since."""
        return self._running

    def stop(self) -> None:
        """Stop serving, kill the master's trials, close its database (once)."""
        if self._running:
            self._running = False
            self.master.stop()

    def restart(self) -> None:
        """Stop (if running), then start a new ``Master`` on the same data dir, database and port."""
        self.stop()
        self.master = self._start({**self._config, "port": self.master.port})
        self._running = True

    def __getattr__(self, name: str) -> Any:
        # Only called for names the handle lacks: the wrapped Master's attributes.
        if name in ("master", "_running", "_config"):
            raise AttributeError(name)
        return getattr(self.master, name)


class MasterFactory:
    """``factory(db=None, *, process=False, data_dir=None, **config)``: start a master.

    ``db`` is a database URL (``None``: SQLite in the data dir). ``process=True`` starts
    ``python -m determined.master up`` in a subprocess (``master_process.MasterProcess``; it takes
    ``slots``, ``db``, ``env``, ``start_timeout`` and ``config_file``); otherwise ``config`` goes
    to ``MasterConfig``.
    ``slots`` defaults to ``default_slots`` (pass ``slots=None`` for the master's own default).
    Without ``data_dir`` a master gets ``<base>/master``, or ``master-2``, ``master-3``, ... while
    an earlier master still runs on it: a master started after another one stopped reuses its
    data dir (a restart), masters running side by side never share one. :meth:`stop_all` stops
    every master this factory started, newest first.
    """

    def __init__(self, base: pathlib.Path, default_slots: int = 4) -> None:
        self.base = base
        self.default_slots = default_slots
        self.started: list[Any] = []

    def __call__(
        self,
        db: str | None = None,
        *,
        process: bool = False,
        data_dir: pathlib.Path | str | None = None,
        **config: Any,
    ) -> Any:
        config.setdefault("slots", self.default_slots)
        directory = pathlib.Path(data_dir) if data_dir is not None else self._free_data_dir()
        handle: Any
        if process:
            from master_process import MasterProcess

            handle = MasterProcess(directory, db=db, **config)
        else:
            handle = InProcessMaster(db=db, data_dir=str(directory), **config)
        self.started.append(handle)
        return handle

    def _free_data_dir(self) -> pathlib.Path:
        busy = {str(h.data_dir) for h in self.started if h.running}
        for n in range(1, len(self.started) + 2):
            path = self.base / ("master" if n == 1 else f"master-{n}")
            if str(path.resolve()) not in busy and str(path) not in busy:
                return path
        raise AssertionError("unreachable: one more name than masters started")

    def stop_all(self) -> None:
        """Stop every master started here (newest first)."""
        while self.started:
            self.started.pop().stop()
