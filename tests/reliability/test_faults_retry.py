"""A trial's session rides out an unreachable master for its retry window, and not longer.

A real HTTP server on a loopback port stands in for the master (no patching): it is absent (the port
refuses connections), answers 503, or drops a request without answering. A trial's session
(``allocation_token=True``) retries for ``DET_MASTER_RETRY_WINDOW`` seconds; a POST is retried only
when it certainly did not take effect (never sent, or 503), so a report is stored once.
"""

from __future__ import annotations

import http.server
import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from refused_port import refusing_socket

from determined.client import MasterClient, Session, _errors, _session
from determined.core import _metrics


class _Master(http.server.ThreadingHTTPServer):
    """Records every request; ``mode`` says how it answers: ``ok``, ``503`` or ``drop``."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, sock: socket.socket | None = None) -> None:
        """Serve a new loopback port, or ``sock``'s (bound, not yet listening)."""
        super().__init__(("127.0.0.1", 0), _Handler, bind_and_activate=sock is None)
        if sock is not None:
            self.socket.close()
            self.socket = sock
            self.server_address = sock.getsockname()
            self.server_activate()
        self.mode = "ok"
        self.requests: list[tuple[str, str, Any]] = []
        self.lock = threading.Lock()
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def close(self) -> None:
        self.shutdown()
        self.server_close()


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _Master

    def log_message(self, *_args: Any) -> None:
        pass

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length)) if length else None
        with self.server.lock:
            self.server.requests.append((self.command, self.path, body))
        if self.server.mode == "drop":  # read the request, then vanish without an answer
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        status = 503 if self.server.mode == "503" else 200
        payload = json.dumps(
            {"error": {"error": "the database is unavailable, retry later"}}
            if status == 503
            else {}
        ).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = _handle


@pytest.fixture
def master() -> Iterator[_Master]:
    server = _Master()
    yield server
    server.close()


def test_retry_window_is_honoured_when_the_master_is_gone() -> None:
    """Nothing listens: a trial session with a 1.5 s window gives up after 1.5 s, not before,
    and long before the default window."""
    with refusing_socket() as sock:
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        session = Session(url, "t", retry_window=1.5, backoff=0.05)
        started = time.monotonic()
        with pytest.raises(_errors.MasterNotFoundError):
            session.request("POST", "/api/v1/trials/1/progress", body=0.5)
        elapsed = time.monotonic() - started
    # the upper bound tells the window given from the default one (600 s), with room for a loaded
    # machine: a tighter one would measure this host's speed, not the session
    assert 1.5 <= elapsed < 1.5 + _session.MAX_BACKOFF_S + 30, elapsed


def test_window_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """``DET_MASTER_RETRY_WINDOW`` sets a trial session's window (default 10 minutes, so a 5-minute
    master restart is ridden out); a user session keeps its fixed attempts; a bad value is named."""
    monkeypatch.delenv(_session.RETRY_WINDOW_ENV, raising=False)
    assert Session("http://x", "t", allocation_token=True).retry_window == 600.0
    assert _session.DEFAULT_RETRY_WINDOW_S >= 300
    assert Session("http://x", "t").retry_window is None
    monkeypatch.setenv(_session.RETRY_WINDOW_ENV, "2.5")
    assert Session("http://x", "t", allocation_token=True).retry_window == 2.5
    monkeypatch.setenv(_session.RETRY_WINDOW_ENV, "soon")
    with pytest.raises(ValueError, match="DET_MASTER_RETRY_WINDOW"):
        Session("http://x", "t", allocation_token=True)


def test_a_post_rides_out_503s_and_is_sent_until_acknowledged(master: _Master) -> None:
    """503s (a locked or restarting database) are retried within the window; the report reaches
    the master once it answers."""
    master.mode = "503"
    session = Session(master.url, "t", allocation_token=True, retry_window=30, backoff=0.05)
    threading.Timer(0.6, lambda: setattr(master, "mode", "ok")).start()
    session.request("POST", "/api/v1/trials/1/metrics", body={"metrics": {"loss": 1}})
    assert len(master.requests) >= 2  # answered 503 at least once, then accepted
    assert master.mode == "ok"


def test_a_post_that_may_have_arrived_is_not_sent_twice(master: _Master) -> None:
    """The master read the POST and dropped the connection: it may have stored it, so the
    session does not send it again (a GET in the same situation is retried)."""
    master.mode = "drop"
    session = Session(master.url, "t", allocation_token=True, retry_window=2, backoff=0.05)
    with pytest.raises(_errors.MasterNotFoundError):
        session.request("POST", "/api/v1/trials/1/metrics", body={"metrics": {"loss": 1}})
    assert [m for m, _, _ in master.requests] == ["POST"]
    threading.Timer(0.3, lambda: setattr(master, "mode", "ok")).start()
    session.request("GET", "/api/v1/trials/1/searcher/operation")
    assert [m for m, _, _ in master.requests].count("GET") >= 2


def test_metrics_shipper_buffers_through_a_master_restart() -> None:
    """The master is away (its port refuses connections) for three of the shipper's attempts
    while a trial reports: the shipper keeps the reports, ``report()`` never raises, and once the
    master is back every report arrives exactly once, in order."""
    sock = refusing_socket()  # the port is this test's through the outage
    port = sock.getsockname()[1]
    session = Session(f"http://127.0.0.1:{port}", "t", allocation_token=True, retry_window=60)
    session.backoff = 0.05
    attempts = threading.Semaphore(0)  # released once per HTTP attempt of the session
    http_of = session._http

    class _Counted:
        def __init__(self, http: Any) -> None:
            self._http = http

        def request(self, *args: Any, **kwargs: Any) -> Any:
            try:
                return self._http.request(*args, **kwargs)
            finally:
                attempts.release()

    session._http = lambda: _Counted(http_of())  # type: ignore[method-assign]
    client = MasterClient(session)
    shipper = _metrics.MetricsShipper(
        lambda batch: client.report_trial_metrics_batch(
            1, [{"trialRunId": 1, "stepsCompleted": r.steps_completed} for r in batch]
        )
    )
    for step in range(1, 21):
        shipper.report("training", {"loss": 1.0 / step}, step)
    for _ in range(3):  # the outage: three attempts refused, nothing listens on the port
        assert attempts.acquire(timeout=30)
    for step in range(21, 41):
        shipper.report("training", {"loss": 1.0 / step}, step)
    server = _Master(sock=sock)
    try:
        shipper.flush(timeout=60)
        shipper.close()
        steps: list[int] = []
        for method, path, body in server.requests:
            assert method == "POST", path
            if path.endswith("/metrics/batch"):
                steps.extend(r["stepsCompleted"] for r in body["reports"])
            else:  # a single report goes to the upstream route
                steps.append(body["stepsCompleted"])
        assert steps == list(range(1, 41))
    finally:
        server.close()
