"""One HTTP session to the master: JSON encoding, auth headers, error mapping and safe retries.

Only idempotent requests are retried (GET, PUT, DELETE, and calls the client marks idempotent): retrying a
POST that reached the master could report a metric or a checkpoint twice. A POST is retried only when it
certainly did not take effect: the connection was never made, or the master answered 503.

A trial's session (``allocation_token=True``) rides out a master restart or a database outage: it retries
for a *retry window* (``DET_MASTER_RETRY_WINDOW`` seconds, default :data:`DEFAULT_RETRY_WINDOW_S`)
instead of a fixed number of attempts, with a backoff capped at :data:`MAX_BACKOFF_S`.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any

from determined.client import _errors

if TYPE_CHECKING:
    import requests

ALLOCATION_TOKEN_HEADER = "Grpc-Metadata-x-allocation-token"
IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})
RETRY_WINDOW_ENV = "DET_MASTER_RETRY_WINDOW"
DEFAULT_RETRY_WINDOW_S = 600.0
"""How long a trial's requests keep retrying an unreachable master (10 minutes: a master upgrade or
crash-and-restart of 5 minutes must not fail a running trial)."""
MAX_BACKOFF_S = 2.0


def retry_window_from_env() -> float:
    """The retry window of trial sessions: ``DET_MASTER_RETRY_WINDOW`` seconds, else the default.

    Raises:
        ValueError: the variable is set but is no non-negative number.
    """
    import os

    text = os.environ.get(RETRY_WINDOW_ENV, "").strip()
    if not text:
        return DEFAULT_RETRY_WINDOW_S
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{RETRY_WINDOW_ENV}: {text!r} is not a number of seconds") from None
    if not value >= 0:
        raise ValueError(f"{RETRY_WINDOW_ENV}: must be >= 0 seconds, got {text!r}")
    return value


def _never_sent(exc: Exception) -> bool:
    """Whether a ``requests.ConnectionError`` happened before the request left this machine
    (connection refused, connect timeout): retrying such a POST cannot duplicate it."""
    import requests
    from urllib3.exceptions import ConnectTimeoutError, NewConnectionError

    if isinstance(exc, requests.ConnectTimeout):
        return True
    reason = getattr(exc.args[0], "reason", None) if exc.args else None
    return isinstance(reason, (NewConnectionError, ConnectTimeoutError))


def _sanitize(value: Any) -> Any:
    """Make ``value`` JSON-safe the way Determined does: NaN/±Inf as strings, numpy scalars as Python."""
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return value
    if isinstance(value, dict):
        return {str(k): _sanitize(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_sanitize(v) for v in value]
    if isinstance(value, (str, int, bool)) or value is None:
        return value
    item = getattr(value, "item", None)  # numpy / torch scalars
    if callable(item):
        try:
            return _sanitize(item())
        except (TypeError, ValueError):
            pass
    tolist = getattr(value, "tolist", None)
    if callable(tolist):
        return _sanitize(tolist())
    return str(value)


def encode_json(body: Any) -> bytes:
    """JSON bytes of ``body``; the sanitizing walk runs only when plain encoding fails (NaN, numpy)."""
    try:
        return json.dumps(body, allow_nan=False).encode()
    except (TypeError, ValueError):
        return json.dumps(_sanitize(body), allow_nan=False).encode()


class Session:
    """A keep-alive HTTP session to one master.

    Args:
        master_url: ``http://host:port``.
        token: a user session token (``Authorization: Bearer``) or, with ``allocation_token=True``, the
            allocation token a trial got in its ClusterInfo.
        cert: a CA bundle path, ``False`` to skip verification, or ``None`` for the default.
        max_retries: attempts for idempotent requests on connection errors and 502/503/504.
        retry_window: seconds to keep retrying instead of ``max_retries`` attempts (the first failure
            starts the window). Default: none, but a session with ``allocation_token=True`` (a
            trial's) takes :func:`retry_window_from_env`.
    """

    def __init__(
        self,
        master_url: str,
        token: str | None = None,
        *,
        allocation_token: bool = False,
        cert: str | bool | None = None,
        max_retries: int = 5,
        backoff: float = 0.5,
        retry_window: float | None = None,
    ) -> None:
        self.master_url = master_url.rstrip("/")
        if retry_window is None and allocation_token:
            retry_window = retry_window_from_env()
        self.retry_window = retry_window
        self.token = token
        self.allocation_token = allocation_token
        self.cert = cert
        self.max_retries = max_retries
        self.backoff = backoff
        # requests.Session is not documented thread-safe: one per thread (metrics, watcher, main).
        self._local = threading.local()

    def _http(self) -> requests.Session:
        http = getattr(self._local, "http", None)
        if http is None:
            import requests

            http = requests.Session()
            from determined.client._tls import configure_tls

            # None: DET_MASTER_CERT_FILE / DET_MASTER_CERT_NAME decide (upstream's variables).
            configure_tls(http, self.cert, getattr(self, "cert_name", None))
            self._local.http = http
        return http

    def headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        if self.token:
            name = ALLOCATION_TOKEN_HEADER if self.allocation_token else "Authorization"
            headers[name] = f"Bearer {self.token}"
        return headers

    def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: dict[str, Any] | None = None,
        timeout: float | None = 60.0,
        idempotent: bool | None = None,
    ) -> Any:
        """Send one request; return the decoded JSON body (``None`` when empty).

        Raises:
            APIError (or a subclass) for error statuses, MasterNotFoundError when unreachable.
        """
        import requests

        retry = method in IDEMPOTENT_METHODS if idempotent is None else idempotent
        url = f"{self.master_url}/{path.lstrip('/')}"
        data = encode_json(body) if body is not None else None
        attempt = 0
        window_end: float | None = None
        while True:
            try:
                response = self._http().request(
                    method, url, data=data, params=params, headers=self.headers(), timeout=timeout
                )
            except requests.ConnectionError as exc:
                failure: Exception = _errors.MasterNotFoundError(
                    f"cannot reach the master at {self.master_url}: {exc}"
                )
                failure.__cause__ = exc
                retryable = retry or _never_sent(exc)
            else:
                status = response.status_code
                retryable = status == 503 or (retry and status in (502, 504))
                if not retryable:
                    return self._decode(method, path, response)
                try:
                    self._decode(method, path, response)
                except _errors.APIError as exc:
                    failure = exc
            attempt += 1
            if not retryable:
                raise failure
            now = time.monotonic()
            if self.retry_window is not None:
                if window_end is None:
                    window_end = now + self.retry_window
                if now >= window_end:
                    raise failure
                delay = min(self.backoff * (2 ** (attempt - 1)), MAX_BACKOFF_S, window_end - now)
            else:
                if attempt >= (self.max_retries if retry else 1):
                    raise failure
                delay = self.backoff * (2 ** (attempt - 1))
            time.sleep(delay)

    def stream(
        self, path: str, *, params: dict[str, Any] | None = None, timeout: float | None = None
    ) -> Any:
        """Yield the ``result`` of each line of a newline-delimited JSON stream."""
        import requests

        url = f"{self.master_url}/{path.lstrip('/')}"
        try:
            response = self._http().get(
                url, params=params, headers=self.headers(), stream=True, timeout=timeout
            )
        except requests.ConnectionError as exc:
            raise _errors.MasterNotFoundError(
                f"cannot reach the master at {self.master_url}: {exc}"
            ) from exc
        if response.status_code >= 300:
            self._decode("GET", path, response)
        with response:
            for line in response.iter_lines():
                if not line:
                    continue
                item = json.loads(line)
                if item.get("error"):
                    raise _errors.APIError("GET", path, 500, _message(item))
                yield item.get("result", item)

    def download(
        self,
        path: str,
        out: IO[bytes],
        *,
        accept: str = "application/octet-stream",
        timeout: float | None = 60.0,
        on_chunk: Callable[[int], None] | None = None,
    ) -> int:
        """GET a binary body into ``out`` chunk by chunk; return the number of bytes written.

        ``on_chunk`` is called with the running total after each chunk (for progress output).

        Raises:
            APIError (or a subclass) for error statuses, MasterNotFoundError when unreachable.
        """
        import requests

        url = f"{self.master_url}/{path.lstrip('/')}"
        headers = dict(self.headers(), Accept=accept)
        try:
            response = self._http().get(url, headers=headers, stream=True, timeout=timeout)
        except requests.ConnectionError as exc:
            raise _errors.MasterNotFoundError(
                f"cannot reach the master at {self.master_url}: {exc}"
            ) from exc
        with response:
            if response.status_code >= 300:
                self._decode("GET", path, response)
            received = 0
            for chunk in response.iter_content(1 << 20):
                out.write(chunk)
                received += len(chunk)
                if on_chunk is not None:
                    on_chunk(received)
        return received

    @staticmethod
    def _decode(method: str, path: str, response: requests.Response) -> Any:
        if response.status_code < 300:
            if not response.content:
                return None
            return response.json()
        try:
            message = _message(response.json())
        except ValueError:
            message = response.text.strip() or response.reason
        kind = {
            401: _errors.UnauthenticatedError,
            403: _errors.ForbiddenError,
            404: _errors.NotFoundError,
        }.get(response.status_code, _errors.APIError)
        raise kind(method, path, response.status_code, message)

    def close(self) -> None:
        http = getattr(self._local, "http", None)
        if http is not None:
            http.close()
            self._local.http = None


def _message(body: Any) -> str:
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict):
            return str(error.get("error") or error.get("message") or error)
        if error:
            return str(error)
        if "message" in body:
            return str(body["message"])
    return str(body)
