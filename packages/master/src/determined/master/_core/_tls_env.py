"""What a trial or task process needs to trust an HTTPS master (``DET_MASTER_CERT_FILE``/``_NAME``).

A master serving HTTPS registers its certificate here when it starts; the launch code asks
:func:`tls_env` for the variables of the master URL it hands a process. The bundle given to the
process holds the master's certificate and the usual public roots, so a self-signed certificate and
a CA-signed one both verify. When the certificate does not name the address processes connect to
(``127.0.0.1``), ``DET_MASTER_CERT_NAME`` carries a name it does hold.
"""

from __future__ import annotations

import logging
import pathlib
import threading
from typing import Any

logger = logging.getLogger("determined.master")

_lock = threading.Lock()
_by_url: dict[str, dict[str, str]] = {}


def _cert_names(cert_file: str) -> tuple[list[str], list[str]]:
    """(DNS names, IP addresses) of the first certificate in ``cert_file`` (empty if unreadable)."""
    import ssl

    decode: Any = getattr(getattr(ssl, "_ssl", None), "_test_decode_cert", None)
    if decode is None:
        return [], []
    try:
        info = decode(cert_file)
    except (OSError, ValueError, ssl.SSLError):
        return [], []
    dns = [v for k, v in info.get("subjectAltName", ()) if k == "DNS"]
    ips = [v.strip() for k, v in info.get("subjectAltName", ()) if k == "IP Address"]
    if not dns:
        for rdn in info.get("subject", ()):
            dns.extend(v for k, v in rdn if k == "commonName")
    return dns, ips


def register(master_url: str, cert_file: str, data_dir: pathlib.Path, connect_host: str) -> None:
    """Make processes launched with ``master_url`` trust ``cert_file`` (writes a bundle into
    ``data_dir``)."""
    bundle = data_dir / "master-ca-bundle.pem"
    parts = [pathlib.Path(cert_file).read_text()]
    try:
        import certifi

        parts.append(pathlib.Path(certifi.where()).read_text())
    except (ImportError, OSError):
        logger.warning("master: certifi not found; trials trust only the master's certificate")
    bundle.write_text("\n".join(parts))
    env = {"DET_USE_TLS": "true", "DET_MASTER_CERT_FILE": str(bundle)}
    dns, ips = _cert_names(cert_file)
    host = connect_host.strip("[]")
    if host not in ips and host not in dns and dns:
        env["DET_MASTER_CERT_NAME"] = dns[0]
    with _lock:
        _by_url[master_url] = env


def unregister(master_url: str) -> None:
    """Forget a stopped master."""
    with _lock:
        _by_url.pop(master_url, None)


def tls_env(master_url: str) -> dict[str, str]:
    """The TLS variables of a process launched with ``master_url`` (``DET_USE_TLS`` at least)."""
    with _lock:
        env = _by_url.get(master_url)
    return dict(env) if env else {"DET_USE_TLS": "false"}
