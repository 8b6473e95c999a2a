"""TCP tunnels to a trial's proxy ports through the master (``environment.proxy_ports``).

det-master carries a ``proxy_tcp`` port's stream in the binary messages of a WebSocket at
``/proxy/<task id>:<port>/`` (upstream's protocol). This module is the client side: a local
listener whose every connection opens one such WebSocket (``python -m determined.cli.tunnel
--listener``, ``det e create -p``), or standard input and output (an ssh ``ProxyCommand``). The
WebSocket client is the few lines of RFC 6455 a binary stream needs, so det-cli needs no library
for it.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import hashlib
import os
import socket
import socketserver
import ssl
import struct
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
_BINARY, _CLOSE, _PING, _PONG = 0x2, 0x8, 0x9, 0xA
_CHUNK = 65536


class TunnelError(Exception):
    """The master refused the WebSocket (no such service, not logged in, port not listening)."""


def _masked(data: bytes, mask: bytes) -> bytes:
    if not data:
        return data
    key = (mask * (len(data) // 4 + 1))[: len(data)]
    return (int.from_bytes(data, "big") ^ int.from_bytes(key, "big")).to_bytes(len(data), "big")


def _ssl_context(cert: str | bool | None) -> ssl.SSLContext:
    if cert is None:
        cert = os.environ.get("DET_MASTER_CERT_FILE") or None
    if cert is False or cert == "noverify":
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context
    return ssl.create_default_context(cafile=cert if isinstance(cert, str) else None)


class WebSocket:
    """A client WebSocket carrying binary messages (thread-safe sends)."""

    def __init__(self, sock: socket.socket, buffered: bytes) -> None:
        self._sock = sock
        self._buffer = buffered
        self._send_lock = threading.Lock()
        self.closed = False

    @classmethod
    def connect(
        cls, master_url: str, path: str, token: str | None, cert: str | bool | None = None
    ) -> WebSocket:
        """Open ``ws(s)://<master>/<path>``, logged in with ``token`` (a user session's)."""
        url = urllib.parse.urlsplit(master_url)
        secure = url.scheme == "https"
        host = url.hostname or "127.0.0.1"
        port = url.port or (443 if secure else 80)
        sock = socket.create_connection((host, port), timeout=30)
        if secure:
            sock = _ssl_context(cert).wrap_socket(sock, server_hostname=host)
        key = base64.b64encode(os.urandom(16)).decode()
        lines = [
            f"GET {url.path.rstrip('/')}/{path.lstrip('/')} HTTP/1.1",
            f"Host: {url.netloc}",
            "Upgrade: websocket",
            "Connection: Upgrade",
            f"Sec-WebSocket-Key: {key}",
            "Sec-WebSocket-Version: 13",
        ]
        if token:
            lines.append(f"Authorization: Bearer {token}")
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(4096)
            if not chunk:
                sock.close()
                raise TunnelError(f"the master closed the connection to /{path}")
            data += chunk
        head, _, rest = data.partition(b"\r\n\r\n")
        status, *header_lines = head.decode("latin-1").split("\r\n")
        headers = {
            k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in header_lines)
        }
        if " 101 " not in f"{status} ":
            sock.close()
            raise TunnelError(f"the master refused /{path}: {status}")
        accept = base64.b64encode(hashlib.sha1((key + _GUID).encode()).digest()).decode()
        if headers.get("sec-websocket-accept") != accept:
            sock.close()
            raise TunnelError(f"the master answered /{path} with a bad handshake")
        sock.settimeout(None)
        return cls(sock, rest)

    def _send_frame(self, opcode: int, payload: bytes) -> None:
        mask = os.urandom(4)
        length = len(payload)
        if length < 126:
            header = struct.pack("!BB", 0x80 | opcode, 0x80 | length)
        elif length < 1 << 16:
            header = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, length)
        else:
            header = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, length)
        with self._send_lock:
            self._sock.sendall(header + mask + _masked(payload, mask))

    def send(self, data: bytes) -> None:
        """Send one binary message."""
        self._send_frame(_BINARY, data)

    def _read(self, n: int) -> bytes:
        while len(self._buffer) < n:
            chunk = self._sock.recv(_CHUNK)
            if not chunk:
                raise EOFError
            self._buffer += chunk
        out, self._buffer = self._buffer[:n], self._buffer[n:]
        return out

    def messages(self) -> Iterator[bytes]:
        """The payloads of data messages until the master closes (pings are answered)."""
        try:
            while True:
                first, second = self._read(2)
                opcode, length = first & 0x0F, second & 0x7F
                if length == 126:
                    (length,) = struct.unpack("!H", self._read(2))
                elif length == 127:
                    (length,) = struct.unpack("!Q", self._read(8))
                mask = self._read(4) if second & 0x80 else b""
                payload = self._read(length)
                if mask:
                    payload = _masked(payload, mask)
                if opcode == _CLOSE:
                    with contextlib.suppress(OSError):
                        self._send_frame(_CLOSE, payload[:2])
                    return
                if opcode == _PING:
                    self._send_frame(_PONG, payload)
                elif opcode != _PONG and payload:
                    yield payload
        except (EOFError, OSError):
            return

    def close(self) -> None:
        """Say goodbye and close the socket (idempotent)."""
        if self.closed:
            return
        self.closed = True
        with contextlib.suppress(OSError):
            self._send_frame(_CLOSE, struct.pack("!H", 1000))
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()


def pump(ws: WebSocket, read: Callable[[], bytes], write: Callable[[bytes], Any]) -> None:
    """Copy ``read()`` chunks into ``ws`` and its messages into ``write`` until either ends."""

    def upstream() -> None:
        try:
            while chunk := read():
                ws.send(chunk)
        except OSError:
            pass
        finally:
            ws.close()

    sender = threading.Thread(target=upstream, daemon=True)
    sender.start()
    try:
        for message in ws.messages():
            write(message)
    except OSError:
        pass
    finally:
        ws.close()


@dataclasses.dataclass(frozen=True)
class Listener:
    """A local port forwarded to a service (``<task id>:<port>``)."""

    service_id: str
    local_port: int
    local_addr: str = "0.0.0.0"


@contextlib.contextmanager
def listening(
    master_url: str, token: str | None, listeners: list[Listener], cert: str | bool | None = None
) -> Iterator[None]:
    """Serve every listener's port while the block runs: each connection is one tunnel."""

    def handler_for(listener: Listener) -> type[socketserver.BaseRequestHandler]:
        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                conn: socket.socket = self.request
                try:
                    ws = WebSocket.connect(master_url, f"proxy/{listener.service_id}/", token, cert)
                except (TunnelError, OSError) as e:
                    print(f"tunnel to {listener.service_id}: {e}", flush=True)
                    return
                pump(ws, lambda: conn.recv(_CHUNK), conn.sendall)

        return Handler

    class Server(socketserver.ThreadingTCPServer):
        allow_reuse_address = True
        daemon_threads = True

    servers = [Server((x.local_addr, x.local_port), handler_for(x)) for x in listeners]
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in servers]
    for thread in threads:
        thread.start()
    try:
        yield
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()


def stdio(master_url: str, token: str | None, service_id: str, cert: str | bool | None) -> None:
    """Tunnel standard input and output to the service (e.g. ssh's ``ProxyCommand``)."""
    ws = WebSocket.connect(master_url, f"proxy/{service_id}/", token, cert)
    stdin: BinaryIO = os.fdopen(os.dup(0), "rb", buffering=0)
    stdout: BinaryIO = os.fdopen(os.dup(1), "wb", buffering=0)
    pump(ws, lambda: stdin.read(_CHUNK) or b"", stdout.write)


def parse_publish(values: list[str]) -> dict[int, int]:
    """``-p 8265`` / ``-p 8266:8265``: local port → trial port."""
    out: dict[int, int] = {}
    for value in values:
        local, _, remote = value.partition(":")
        try:
            out[int(local)] = int(remote or local)
        except ValueError:
            raise ValueError(f"--publish {value!r}: expected PORT or LOCAL:TRIAL") from None
    return out


def first_trial_task(get_trials: Callable[[], list[dict[str, Any]]]) -> str:
    """The task id of an experiment's first trial, once it exists."""
    delay = 0.1
    while True:
        trials = get_trials()
        if trials:
            first = min(trials, key=lambda t: int(t["id"]))
            if first.get("taskId"):
                return str(first["taskId"])
        time.sleep(delay)
        delay = min(delay * 1.5, 1.0)
