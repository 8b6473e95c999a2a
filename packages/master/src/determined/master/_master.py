"""The master process: database, resource manager, core services and HTTP server together."""

from __future__ import annotations

import collections
import datetime
import logging
import socket
import threading
import time
import uuid
from typing import Any

from sqlalchemy import select

from determined.master import _auth
from determined.master._config import LOOPBACK_HOSTS, MasterConfig
from determined.master._core import _context, _tls_env
from determined.master._core._manager import Manager
from determined.master._core._tokens import TokenSettings
from determined.master.db import ClusterMeta, Database, User

logger = logging.getLogger("determined.master")

KEEP_ALIVE_S = 75
"""How long an idle client connection stays open (uvicorn's default is 5 s)."""


class _BufferHandler(logging.Handler):
    """Keeps the master's recent log records for ``GET /api/v1/master/logs``."""

    def __init__(self, buffer: collections.deque[dict[str, Any]]) -> None:
        super().__init__(logging.INFO)
        self.buffer = buffer
        self.counter = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.counter += 1
        self.buffer.append(
            {
                "id": self.counter,
                "message": record.getMessage(),
                "timestamp": datetime.datetime.fromtimestamp(record.created, datetime.timezone.utc)
                .isoformat()
                .replace("+00:00", "Z"),
                "level": f"LOG_LEVEL_{record.levelname}",
            }
        )


class Master:
    """One det master.

    ``start()`` migrates the database, creates the built-in users, starts the resource manager,
    resumes unfinished experiments and serves HTTP on a background thread; ``stop()`` undoes it.
    Port 0 picks a free port; ``url`` tells which.
    """

    def __init__(self, config: MasterConfig | None = None) -> None:
        from determined.master import __version__

        self.config = config or MasterConfig()
        self.config.check()
        self.version = __version__
        self.data_dir = self.config.resolved_data_dir()
        self.db = Database(
            self.config.db_url(), busy_timeout_s=float(self.config.db_busy_timeout_s)
        )
        self.rm: Any = None
        self._manager: Manager | None = None
        self.cluster_id = ""
        self.master_id = str(uuid.uuid4())
        self.url = ""
        self.port = 0
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._sock: socket.socket | None = None
        self.log_buffer: collections.deque[dict[str, Any]] = collections.deque(maxlen=5000)
        self._log_handler = _BufferHandler(self.log_buffer)

    @property
    def manager(self) -> Manager:
        """The core services, wired together (exists once :meth:`start` ran)."""
        if self._manager is None:
            raise RuntimeError("the master is not started")
        return self._manager

    def describe(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "masterId": self.master_id,
            "clusterId": self.cluster_id,
            "clusterName": self.config.cluster_name or "det",
            "telemetryEnabled": False,
            "ssoProviders": [],
            "externalLoginUri": "",
            "externalLogoutUri": "",
            "branding": "determined",
            "rbacEnabled": self.config.rbac_ui_enabled(),
            "strictJobQueueControl": False,
            "product": "PRODUCT_UNSPECIFIED",
            "userManagementEnabled": True,
            "featureSwitches": [],
            "hasCustomLogo": False,
        }

    def _init_db(self) -> None:
        self.db.migrate()
        password = self.config.initial_admin_password or ""
        with self.db.write() as session:
            meta = session.scalar(select(ClusterMeta))
            if meta is None:
                meta = ClusterMeta(cluster_id=str(uuid.uuid4()))
                session.add(meta)
            self.cluster_id = meta.cluster_id
            for name, admin in (("admin", True), ("determined", False)):
                user = session.scalar(select(User).where(User.username == name))
                if user is None:
                    session.add(
                        User(
                            username=name,
                            admin=admin,
                            password_hash=_auth.store_hash(_auth.client_hash(password)),
                        )
                    )
            session.flush()
            empty = session.scalars(
                select(User.username).where(
                    User.admin.is_(True), User.active.is_(True), User.password_hash == ""
                )
            ).all()
        if empty and self.config.host not in LOOPBACK_HOSTS:
            names = ", ".join(sorted(empty))
            raise RuntimeError(
                f"refusing to listen on {self.config.host}: admin user(s) {names} have an empty"
                " password. Set one first: start the master on 127.0.0.1 (the default host) and"
                f" run `det -m http://127.0.0.1:{self.config.port} user change-password"
                f" {sorted(empty)[0]}`, or deactivate the user; a new data dir takes"
                " --initial-admin-password"
            )

    def start(self) -> None:
        """Start serving (returns once the HTTP server accepts connections)."""
        import uvicorn

        from determined.master._api._app import create_app
        from determined.master.rm import resource_manager

        logging.getLogger("determined.master").addHandler(self._log_handler)
        logging.getLogger("determined.master").setLevel(logging.INFO)
        self._init_db()
        self.rm = resource_manager(self.config.resource_manager_config())
        self._manager = Manager(
            self.db,
            self.rm,
            self.data_dir,
            self.cluster_id,
        )
        self._manager.authz.configure(*self.config.authz_settings())
        self._manager.webhooks.configure(self.config.webhooks)
        self._manager.tokens.settings = TokenSettings.from_security(self.config.security)
        self._manager.tasks.limits = self.config.limits_config()
        self._manager.tasks.container_defaults = self.config.task_container_defaults_for
        _context.allow_contexts_up_to(self._manager.tasks.limits.max_context_bytes)
        sock = socket.socket(socket.AF_INET6 if ":" in self.config.host else socket.AF_INET)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # Accepted connections inherit this: without it, a keep-alive response written in two
        # parts waits ~40 ms for the client's delayed ACK (Nagle).
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((self.config.host, int(self.config.port)))
        sock.listen(128)
        sock.set_inheritable(False)
        self._sock = sock
        self.port = sock.getsockname()[1]
        host = self.config.host if ":" not in self.config.host else f"[{self.config.host}]"
        connect_host = "127.0.0.1" if self.config.host in ("0.0.0.0", "") else host
        tls = self.config.tls_files()
        self.url = f"{'https' if tls else 'http'}://{connect_host}:{self.port}"
        self.manager.master_url = self.url
        if tls:
            _tls_env.register(self.url, tls[0], self.data_dir, connect_host)
        self.manager.start_dispatcher()
        self.rm.start(self.manager.events)
        self.manager.recover()
        app = create_app(self)
        config = uvicorn.Config(
            app,
            log_level="warning",
            access_log=False,
            lifespan="on",
            timeout_graceful_shutdown=2,
            # Upstream's Go master never closed idle connections; uvicorn's default (5 s) races
            # clients that poll every few seconds: a request sent as the server closes the
            # connection fails with "connection reset by peer".
            timeout_keep_alive=KEEP_ALIVE_S,
            ssl_certfile=tls[0] if tls else None,
            ssl_keyfile=tls[1] if tls else None,
        )
        self._server = uvicorn.Server(config)
        self._server.install_signal_handlers = lambda: None
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name="det-master-http", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if not self._thread.is_alive():
                raise RuntimeError("the master's HTTP server failed to start")
            if time.monotonic() > deadline:
                raise RuntimeError("the master's HTTP server did not start within 30 s")
            time.sleep(0.01)
        logger.info(
            "det-master %s serving on %s (data dir %s)", self.version, self.url, self.data_dir
        )

    def serve_forever(self) -> None:
        """Block until the server thread ends (``det-master up`` in the foreground)."""
        while self._thread is not None and self._thread.is_alive():
            self._thread.join(0.5)

    def request_stop(self) -> None:
        """Begin a graceful stop (the SIGTERM handler): running trials are left to the next start's
        recovery, never failed because this master goes away."""
        if self._manager is not None:
            self._manager.begin_shutdown()
        if self._server is not None:
            self._server.should_exit = True

    def stop(self) -> None:
        """Stop serving, kill running trials and close the database. Trials stay non-terminal: a
        master started on the same database resumes them from their latest checkpoints."""
        if self._manager is not None:
            self._manager.begin_shutdown()
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(10)
        if self._manager is not None:
            self._manager.stop()
        if self.rm is not None:
            try:
                self.rm.close()
            except Exception:
                logger.exception("master: closing the resource manager failed")
        if self._sock is not None:
            self._sock.close()
        if self.url:
            _tls_env.unregister(self.url)
        logging.getLogger("determined.master").removeHandler(self._log_handler)
        self.db.close()

    def __enter__(self) -> Master:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
