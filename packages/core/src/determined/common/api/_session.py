"""Upstream's ``api.Session`` family, built on det's ``determined.client.Session``.

Upstream code makes raw calls with ``session.get(path).json()`` and passes the session to
the generated ``bindings``. These classes keep that interface (``get/post/patch/put/delete``
returning a ``requests.Response``, the context manager, ``with_retry``) and are det client
sessions too, so they also work with ``determined.client.Client`` and det's SDK. Error statuses
raise det's client errors, which ``determined.common.api.errors`` names as upstream did.
"""

from __future__ import annotations

import copy
import threading
import time
from typing import TYPE_CHECKING, Any, TypeVar

from determined import util
from determined._info import canonicalize_master_url
from determined.client import MasterNotFoundError
from determined.client import Session as ClientSession
from determined.client._session import ALLOCATION_TOKEN_HEADER, IDEMPOTENT_METHODS

if TYPE_CHECKING:
    from types import TracebackType

    import requests

S = TypeVar("S", bound="BaseSession")

DEFAULT_MAX_RETRIES = 5


def _retries(max_retries: Any) -> int:
    """Attempts for a retry policy given as upstream did: a count, a urllib3 ``Retry``, or None."""
    if max_retries is None:
        return 1
    if isinstance(max_retries, int):
        return max(1, max_retries)
    total = getattr(max_retries, "total", None)
    return max(1, int(total)) if isinstance(total, int) else DEFAULT_MAX_RETRIES


def _verify(cert: Any) -> str | bool | None:
    """``requests``' ``verify`` for upstream's ``certs.Cert`` (its ``bundle``) or a plain value."""
    if cert is None or isinstance(cert, str | bool):
        return cert
    bundle = getattr(cert, "bundle", None)
    return bundle if isinstance(bundle, str | bool) else None


class BaseSession(ClientSession):
    """A session to one master with upstream's request methods.

    Use it directly, or as a context manager (``with api.Session(...) as session:``), which closes
    its connections at the end.
    """

    AUTH_HEADER = "Authorization"

    def __init__(self, master: str, token: str | None, cert: Any, max_retries: Any) -> None:
        super().__init__(
            master,
            token,
            allocation_token=self.AUTH_HEADER == ALLOCATION_TOKEN_HEADER,
            cert=_verify(cert),
            max_retries=_retries(max_retries),
        )
        self.master = self.master_url
        self._max_retries = max_retries

    def __enter__(self: S) -> S:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _do_request(
        self,
        method: str,
        path: str,
        params: dict[str, Any] | None,
        json: Any,
        data: str | None,
        headers: dict[str, Any] | None,
        timeout: float | None,
        stream: bool,
    ) -> requests.Response:
        """Send one request; the response of a success status (below 300).

        Raises:
            determined.client.APIError (or a subclass) for error statuses; MasterNotFoundError
            when the master cannot be reached.
        """
        import requests

        if json is not None and data is not None:
            raise ValueError("json and data must not be provided together")
        if json is not None:
            data = util.json_encode(json)
        url = f"{self.master_url}/{path.lstrip('/')}"
        all_headers = {**self.headers(), **(headers or {})}
        attempts = self.max_retries if method in IDEMPOTENT_METHODS else 1
        for attempt in range(attempts):
            try:
                response = self._http().request(
                    method,
                    url,
                    params=params,
                    data=data,
                    headers=all_headers,
                    timeout=timeout,
                    stream=stream,
                )
            except requests.ConnectionError as exc:
                if attempt + 1 >= attempts:
                    raise MasterNotFoundError(
                        f"cannot reach the master at {self.master_url}: {exc}"
                    ) from exc
            else:
                if response.status_code not in (502, 503, 504) or attempt + 1 >= attempts:
                    if response.status_code >= 300:
                        self._decode(method, path, response)  # raises the matching error
                    return response
            time.sleep(self.backoff * (2**attempt))
        raise AssertionError("unreachable")

    def get(
        self,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        headers: dict[str, Any] | None = None,
        timeout: int | None = None,
        stream: bool = False,
    ) -> requests.Response:
        """GET ``path`` (relative to the master URL)."""
        return self._do_request("GET", path, params, None, None, headers, timeout, stream)

    def delete(
        self,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        headers: dict[str, Any] | None = None,
        timeout: int | None = None,
    ) -> requests.Response:
        """DELETE ``path``."""
        return self._do_request("DELETE", path, params, None, None, headers, timeout, False)

    def post(
        self,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        json: Any = None,
        data: str | None = None,
        headers: dict[str, Any] | None = None,
        timeout: int | None = None,
    ) -> requests.Response:
        """POST ``json`` (encoded as upstream did: NaN as a string...) or raw ``data`` to ``path``."""
        return self._do_request("POST", path, params, json, data, headers, timeout, False)

    def patch(
        self,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        json: Any = None,
        data: str | None = None,
        headers: dict[str, Any] | None = None,
        timeout: int | None = None,
    ) -> requests.Response:
        """PATCH ``path`` with ``json`` or ``data``."""
        return self._do_request("PATCH", path, params, json, data, headers, timeout, False)

    def put(
        self,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        json: Any = None,
        data: str | None = None,
        headers: dict[str, Any] | None = None,
        timeout: int | None = None,
    ) -> requests.Response:
        """PUT ``path`` with ``json`` or ``data``."""
        return self._do_request("PUT", path, params, json, data, headers, timeout, False)

    def with_retry(self: S, max_retries: Any) -> S:
        """A copy of this session with another retry policy (its own connections)."""
        other = copy.copy(self)
        other._max_retries = max_retries
        other.max_retries = _retries(max_retries)
        other._local = threading.local()
        return other


class UnauthSession(BaseSession):
    """A session without credentials: for logging in and the master's public endpoints."""

    def __init__(self, master: str, cert: Any, max_retries: Any = DEFAULT_MAX_RETRIES) -> None:
        super().__init__(canonicalize_master_url(master), None, cert, max_retries)


class Session(BaseSession):
    """A session that authenticates every request with a user's token.

    Args:
        master: the master URL.
        username: the user the token belongs to.
        token: a session token (``determined.client.login`` or ``det user login`` gives one).
        cert: upstream's ``certs.Cert`` (its ``bundle`` is used), a CA bundle path, ``False`` to
            skip verification, or ``None``.
        max_retries: attempts for idempotent requests: a count, a urllib3 ``Retry``, or ``None``.
    """

    def __init__(
        self,
        master: str,
        username: str,
        token: str,
        cert: Any,
        max_retries: Any = DEFAULT_MAX_RETRIES,
    ) -> None:
        super().__init__(canonicalize_master_url(master), token, cert, max_retries)
        self.username = username


class TaskSession(Session):
    """A session authenticated by a task's allocation token (what a trial process gets)."""

    AUTH_HEADER = ALLOCATION_TOKEN_HEADER
