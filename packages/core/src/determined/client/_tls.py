"""How a client verifies an HTTPS master: upstream's ``DET_MASTER_CERT_FILE`` / ``DET_MASTER_CERT_NAME``.

``DET_MASTER_CERT_FILE`` is a PEM bundle of the certificates to trust (a self-signed master's own
certificate, or the CA that signed it), or ``noverify`` to skip verification. ``DET_MASTER_CERT_NAME``
is the host name the master's certificate must carry when the URL names the master otherwise
(``https://10.0.0.5:8080`` with a certificate for ``master.example.com``). Imported when a
session first opens a connection (it needs ``requests``).
"""

from __future__ import annotations

import os
from typing import Any

import requests
from requests.adapters import HTTPAdapter

CERT_FILE_ENV = "DET_MASTER_CERT_FILE"
CERT_NAME_ENV = "DET_MASTER_CERT_NAME"
NOVERIFY = "noverify"


def cert_from_env() -> str | bool | None:
    """What ``DET_MASTER_CERT_FILE`` asks for: a bundle path, ``False`` for ``noverify``, or None
    (the system's trust store)."""
    value = os.environ.get(CERT_FILE_ENV, "").strip()
    if not value:
        return None
    if value.lower() == NOVERIFY:
        return False
    return value


def cert_name_from_env() -> str | None:
    """The host name ``DET_MASTER_CERT_NAME`` says the master's certificate carries (or None)."""
    value = os.environ.get(CERT_NAME_ENV, "").strip()
    return value or None


def configure_tls(http: requests.Session, cert: str | bool | None, cert_name: str | None) -> None:
    """Set how ``http`` verifies HTTPS masters.

    Args:
        http: the session to configure.
        cert: a bundle path, ``False`` (no verification), or None to take ``DET_MASTER_CERT_FILE``.
        cert_name: the name to verify the certificate against, or None to take
            ``DET_MASTER_CERT_NAME`` (and, without it, the URL's host).
    """
    if cert is None:
        cert = cert_from_env()
    name = cert_name if cert_name is not None else cert_name_from_env()
    if cert is None and not name:
        return
    if cert is not None:
        http.verify = cert
    if cert is False:
        import urllib3

        urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
        name = None
    # An adapter, not only ``http.verify``: requests lets REQUESTS_CA_BUNDLE / CURL_CA_BUNDLE
    # override a session's ``verify``, and the master's own bundle must win.
    http.mount("https://", _MasterTLSAdapter(cert, name))


class _MasterTLSAdapter(HTTPAdapter):
    """An HTTPS adapter that verifies with the master's bundle (whatever the environment says)
    and, given a name, checks the certificate against it (and sends it as the TLS server name)
    whatever host the URL names."""

    def __init__(self, cert: str | bool | None, name: str | None) -> None:
        self._cert = cert
        self._cert_name = name
        super().__init__()

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        if self._cert_name:
            kwargs["assert_hostname"] = self._cert_name
            kwargs["server_hostname"] = self._cert_name
        super().init_poolmanager(*args, **kwargs)

    def send(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        if self._cert is not None:
            kwargs["verify"] = self._cert
        return super().send(request, *args, **kwargs)
