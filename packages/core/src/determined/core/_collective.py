"""The transport under DistributedContext: a star of authenticated stdlib sockets.

A *group* is a set of ranks that run collectives together. Member 0 of a group owns a :class:`Hub`
(it listens; a background thread reads every peer's frames); every other member owns a
:class:`Spoke` (one connection to the hub, no thread). A collective is one round trip: each spoke sends
its contribution, the hub waits for all of them (and for its own member's call), checks that every
member called the same collective with the same sequence number, and answers each spoke.

Failures travel as frames too: when a peer disconnects, closes, aborts or fails to arrive within the
timeout, the hub records why and tells every other spoke at once, so pending and future collectives on
every rank raise :class:`~determined._errors.CollectiveError` promptly instead of hanging.

Wire format: each frame is an 8-byte big-endian length followed by the body. Before the handshake
succeeds, bodies are raw bytes and nothing is unpickled. The handshake is a mutual HMAC-SHA256
challenge-response keyed by ``DET_COLLECTIVE_KEY`` (empty key when unset); after it, bodies are pickles.
"""

from __future__ import annotations

import hmac
import json
import logging
import os
import pickle
import secrets
import selectors
import socket
import struct
import threading
import time
from typing import Any

from determined._errors import CollectiveError

logger = logging.getLogger("determined.core")

KEY_ENV = "DET_COLLECTIVE_KEY"
MAGIC = b"DETC1"
_HEADER = struct.Struct("!Q")
_NONCE_BYTES = 32
_MAC_BYTES = 32
_MAX_HANDSHAKE_FRAME = 64 * 1024

# Frame kinds (after the handshake).
_CONTRIB = "contrib"  # spoke -> hub: (kind, seq, name, pickled payload or None)
_RESULT = "result"  # hub -> spoke: (kind, seq, name, body)
_ERROR = "error"  # hub -> spoke: (kind, reason)
_ABORT = "abort"  # spoke -> hub: (kind, reason): this rank gives up on the group
_BYE = "bye"  # either way: (kind, reason): a clean close

Address = tuple[str, int] | str
"""A TCP (host, port) pair or the path of a unix socket."""


def collective_key() -> bytes:
    """The HMAC key shared by every rank of an allocation (``DET_COLLECTIVE_KEY``; empty when unset)."""
    return os.environ.get(KEY_ENV, "").encode()


def _mac(key: bytes, *parts: bytes) -> bytes:
    return hmac.new(key, b"".join(parts), "sha256").digest()


def _send_frame(sock: socket.socket, body: bytes) -> None:
    sock.sendall(_HEADER.pack(len(body)) + body)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    chunks = []
    while n:
        chunk = sock.recv(min(n, 1 << 20))
        if not chunk:
            raise EOFError("connection closed")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _recv_frame(sock: socket.socket, limit: int | None = None) -> bytes:
    (length,) = _HEADER.unpack(_recv_exact(sock, _HEADER.size))
    if limit is not None and length > limit:
        raise EOFError(f"frame of {length} bytes exceeds the handshake limit")
    return _recv_exact(sock, length)


def _connect(address: Address, timeout: float) -> socket.socket:
    if isinstance(address, str):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        try:
            sock.connect(address)
        except BaseException:
            sock.close()
            raise
        return sock
    sock = socket.create_connection(address, timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def listen(address: Address, reserved: bool = False) -> socket.socket:
    """Bind and listen on a TCP (host, port) — port 0 picks a free one — or a unix socket path.

    ``reserved``: the port is one the launcher holds for this job (``launch._util.reserve_ports``):
    bind it beside that hold (``SO_REUSEPORT``). Only then: on any other port a second listener
    should fail with "address in use", not share the port."""
    if isinstance(address, str):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    else:
        sock = socket.socket(socket.AF_INET6 if ":" in address[0] else socket.AF_INET)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reserved:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise CollectiveError(f"DistributedContext: cannot listen on {address!r}: {exc}") from exc
    return sock


def bound_address(listener: socket.socket) -> Address:
    """The address peers should connect to for ``listener``."""
    name = listener.getsockname()
    if isinstance(name, str):
        return name
    host = name[0]
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    return (host, int(name[1]))


class _Peer:
    """The hub's view of one connected spoke."""

    def __init__(self, sock: socket.socket, member: int, rank: int) -> None:
        self.sock = sock
        self.member = member  # index inside the group
        self.rank = rank  # global rank, for messages
        self.buffer = bytearray()
        self.send_lock = threading.Lock()
        self.open = True

    def send(self, body: bytes) -> None:
        with self.send_lock:
            if not self.open:
                return
            try:
                _send_frame(self.sock, body)
            except OSError:
                pass  # the reader thread notices the broken connection and fails the group


class Hub:
    """Member 0 of a group: accepts the other members, then answers their collectives.

    Args:
        listener: a listening socket (see :func:`listen`).
        size: number of members, this one included.
        rank: this member's global rank (for messages).
        key: the HMAC key.
        timeout: seconds for the connection phase and for each collective.
    """

    def __init__(
        self, listener: socket.socket, size: int, rank: int, key: bytes, timeout: float
    ) -> None:
        self._listener = listener
        self._size = size
        self._rank = rank
        self._key = key
        self._timeout = timeout
        self._peers: dict[int, _Peer] = {}
        self._cond = threading.Condition()
        self._pending: dict[int, tuple[int, str, Any]] = {}
        self._failure: str | None = None
        self._failing = False
        self._seq = 0
        self._closed = False
        # Held while sending one frame to every spoke, so a failure notice never overtakes the
        # result of a collective that completed before the failure.
        self._broadcast_lock = threading.Lock()
        self._wake_r, self._wake_w = socket.socketpair()
        self._thread: threading.Thread | None = None

    def accept_all(self) -> None:
        """Block until every other member connected and authenticated (or raise after the timeout)."""
        deadline = time.monotonic() + self._timeout
        try:
            while len(self._peers) < self._size - 1:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    missing = sorted(set(range(1, self._size)) - set(self._peers))
                    raise CollectiveError(
                        f"DistributedContext: {len(self._peers)} of {self._size - 1} peers connected "
                        f"to rank {self._rank} within {self._timeout:g}s (missing group members {missing})"
                    )
                self._listener.settimeout(remaining)
                try:
                    sock, addr = self._listener.accept()
                except TimeoutError:
                    continue
                self._handshake(sock, addr, min(remaining, 30.0))
        except BaseException:
            self.close()
            raise
        finally:
            self._listener.close()
        self._thread = threading.Thread(
            target=self._read_loop, name=f"det-collective-hub-{self._rank}", daemon=True
        )
        self._thread.start()

    def _handshake(self, sock: socket.socket, addr: Any, timeout: float) -> None:
        if sock.family != socket.AF_UNIX:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(timeout)
        try:
            server_nonce = secrets.token_bytes(_NONCE_BYTES)
            _send_frame(sock, MAGIC + server_nonce)
            reply = _recv_frame(sock, _MAX_HANDSHAKE_FRAME)
            client_nonce = reply[:_NONCE_BYTES]
            client_mac = reply[_NONCE_BYTES : _NONCE_BYTES + _MAC_BYTES]
            hello_bytes = reply[_NONCE_BYTES + _MAC_BYTES :]
            expected = _mac(self._key, b"client", server_nonce, client_nonce, hello_bytes)
            if len(client_nonce) != _NONCE_BYTES or not hmac.compare_digest(client_mac, expected):
                logger.warning(
                    "DistributedContext: refused a peer from %s: bad HMAC (DET_COLLECTIVE_KEY differs)",
                    addr,
                )
                sock.close()
                return
            hello = json.loads(hello_bytes)
            member, rank, size = int(hello["member"]), int(hello["rank"]), int(hello["size"])
            problem = ""
            if size != self._size:
                problem = f"group size {size} does not match the hub's {self._size}"
            elif not 1 <= member < self._size:
                problem = f"member index {member} is out of range for a group of {self._size}"
            elif member in self._peers:
                problem = (
                    f"member index {member} is already taken (rank {self._peers[member].rank})"
                )
            status = json.dumps({"error": problem}).encode()
            server_mac = _mac(self._key, b"server", client_nonce, server_nonce, status)
            _send_frame(sock, server_mac + status)
            if problem:
                logger.warning("DistributedContext: refused rank %s: %s", rank, problem)
                sock.close()
                return
        except (OSError, EOFError, ValueError, KeyError) as exc:
            logger.warning("DistributedContext: handshake with %s failed: %s", addr, exc)
            sock.close()
            return
        sock.settimeout(None)
        self._peers[member] = _Peer(sock, member, rank)

    # -- background reader -------------------------------------------------------------------

    def _read_loop(self) -> None:
        selector = selectors.DefaultSelector()
        selector.register(self._wake_r, selectors.EVENT_READ, None)
        for peer in self._peers.values():
            selector.register(peer.sock, selectors.EVENT_READ, peer)
        try:
            while True:
                for key, _ in selector.select():
                    peer = key.data
                    if peer is None:
                        return  # close() woke us
                    try:
                        data = peer.sock.recv(1 << 20)
                    except OSError:
                        data = b""
                    if not data:
                        selector.unregister(peer.sock)
                        self._fail(f"rank {peer.rank} disconnected", skip=peer)
                        continue
                    peer.buffer += data
                    self._drain(peer)
        finally:
            selector.close()

    def _drain(self, peer: _Peer) -> None:
        while len(peer.buffer) >= _HEADER.size:
            (length,) = _HEADER.unpack_from(peer.buffer)
            if len(peer.buffer) < _HEADER.size + length:
                return
            body = bytes(peer.buffer[_HEADER.size : _HEADER.size + length])
            del peer.buffer[: _HEADER.size + length]
            try:
                message = pickle.loads(body)
                kind = message[0]
            except Exception as exc:
                self._fail(f"rank {peer.rank} sent a malformed frame ({exc})", skip=peer)
                return
            if kind == _CONTRIB:
                with self._cond:
                    self._pending[peer.member] = (message[1], message[2], message[3])
                    self._cond.notify_all()
            elif kind == _ABORT:
                self._fail(message[1], skip=peer)
            elif kind == _BYE:
                reason = f"rank {peer.rank} closed its DistributedContext"
                if message[1]:
                    reason += f" ({message[1]})"
                self._fail(reason, skip=peer)

    def _fail(self, reason: str, skip: _Peer | None = None) -> None:
        """Record the group's first failure and tell every other spoke about it."""
        body = pickle.dumps((_ERROR, reason))
        with self._broadcast_lock:
            if self._failing:
                return
            self._failing = True
            # Tell the spokes first: the hub's own rank may exit as soon as it sees the failure.
            for peer in list(self._peers.values()):
                if peer is not skip:
                    peer.send(body)
        with self._cond:
            self._failure = reason
            self._cond.notify_all()

    # -- collectives -------------------------------------------------------------------------

    def collective(self, name: str, payload: Any) -> list[Any]:
        """Run one collective as member 0: wait for every member, return all payloads in member order.

        ``payload`` is this member's value; the caller decides what to send back with :meth:`reply`.
        """
        if self._closed:
            raise CollectiveError(f"{name} failed: this DistributedContext is closed")
        self._seq += 1
        seq = self._seq
        deadline = time.monotonic() + self._timeout
        reason = ""
        with self._cond:
            while len(self._pending) < self._size - 1 or self._failure is not None:
                if self._failure is not None:
                    raise CollectiveError(f"{name} failed: {self._failure}")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    missing = [
                        self._peers[m].rank for m in sorted(set(self._peers) - set(self._pending))
                    ]
                    reason = (
                        f"timed out after {self._timeout:g}s waiting for rank(s) "
                        f"{', '.join(map(str, missing))} to call {name} (call #{seq})"
                    )
                    break
                self._cond.wait(remaining)
            pending, self._pending = self._pending, {}
        if reason:
            self._fail(reason)
            raise CollectiveError(f"{name} failed: {reason}")
        for member in sorted(pending):
            other_seq, other_name, _ = pending[member]
            if other_seq != seq or other_name != name:
                reason = (
                    f"collective mismatch: rank {self._rank} called {name} (call #{seq}) but rank "
                    f"{self._peers[member].rank} called {other_name} (call #{other_seq})"
                )
                self._fail(reason)
                raise CollectiveError(reason)
        return [payload] + [pending[m][2] for m in range(1, self._size)]

    def reply(self, name: str, body: Any) -> None:
        """Send the same result ``body`` of the current collective to every spoke."""
        frame = pickle.dumps((_RESULT, self._seq, name, body), protocol=pickle.HIGHEST_PROTOCOL)
        with self._broadcast_lock:
            for member in range(1, self._size):
                self._peers[member].send(frame)

    def close(self, reason: str = "") -> None:
        if self._closed:
            return
        self._closed = True
        bye = pickle.dumps((_BYE, reason))
        with self._broadcast_lock:
            for peer in self._peers.values():
                peer.send(bye)
                with peer.send_lock:
                    peer.open = False
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        for peer in self._peers.values():
            peer.sock.close()
        self._wake_r.close()
        self._wake_w.close()
        self._listener.close()


class Spoke:
    """A non-zero member of a group: one authenticated connection to the group's hub.

    Args:
        address: where the hub listens.
        member: this member's index in the group (1..size-1).
        size: number of members.
        rank: this member's global rank (for messages).
        hub_rank: the hub's global rank (for messages).
        key: the HMAC key.
        timeout: seconds for the connection phase and for each collective.
    """

    def __init__(
        self,
        address: Address,
        member: int,
        size: int,
        rank: int,
        hub_rank: int,
        key: bytes,
        timeout: float,
    ) -> None:
        self._address = address
        self._hub_rank = hub_rank
        self._rank = rank
        self._timeout = timeout
        self._seq = 0
        self._failure: str | None = None
        self._closed = False
        self._sock = self._connect(member, size, key)

    def _connect(self, member: int, size: int, key: bytes) -> socket.socket:
        deadline = time.monotonic() + self._timeout
        delay = 0.01
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise CollectiveError(
                    f"DistributedContext: rank {self._rank} could not connect to rank "
                    f"{self._hub_rank} at {self._address!r} within {self._timeout:g}s"
                )
            try:
                sock = _connect(self._address, min(remaining, 5.0))
            except OSError:
                time.sleep(min(delay, max(remaining, 0)))
                delay = min(delay * 2, 0.25)
                continue
            try:
                sock.settimeout(max(deadline - time.monotonic(), 0.001))
                greeting = _recv_frame(sock, _MAX_HANDSHAKE_FRAME)
                if not greeting.startswith(MAGIC):
                    raise EOFError("not a det collective endpoint")
                server_nonce = greeting[len(MAGIC) :]
                client_nonce = secrets.token_bytes(_NONCE_BYTES)
                hello = json.dumps({"member": member, "rank": self._rank, "size": size}).encode()
                client_mac = _mac(key, b"client", server_nonce, client_nonce, hello)
                _send_frame(sock, client_nonce + client_mac + hello)
                reply = _recv_frame(sock, _MAX_HANDSHAKE_FRAME)
            except (OSError, EOFError) as exc:
                sock.close()
                raise CollectiveError(
                    f"DistributedContext: rank {self._hub_rank} at {self._address!r} refused the "
                    f"handshake of rank {self._rank} ({exc}); is {KEY_ENV} the same on every rank?"
                ) from exc
            server_mac, status = reply[:_MAC_BYTES], reply[_MAC_BYTES:]
            if not hmac.compare_digest(
                server_mac, _mac(key, b"server", client_nonce, server_nonce, status)
            ):
                sock.close()
                raise CollectiveError(
                    f"DistributedContext: the peer at {self._address!r} failed the HMAC handshake; "
                    f"is {KEY_ENV} the same on every rank?"
                )
            error = json.loads(status).get("error")
            if error:
                sock.close()
                raise CollectiveError(f"DistributedContext: rank {self._rank} refused: {error}")
            sock.settimeout(None)
            return sock

    def _broken(self, name: str, reason: str) -> CollectiveError:
        if self._failure is None:
            self._failure = reason
        return CollectiveError(f"{name} failed: {reason}")

    def collective(self, name: str, payload: Any) -> Any:
        """Send this member's contribution and return the hub's answer for this collective."""
        if self._closed:
            raise CollectiveError(f"{name} failed: this DistributedContext is closed")
        if self._failure is not None:
            raise CollectiveError(f"{name} failed: {self._failure}")
        self._seq += 1
        seq = self._seq
        try:
            frame = pickle.dumps((_CONTRIB, seq, name, payload), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:
            reason = f"rank {self._rank} could not pickle its {name} payload: {exc}"
            self.abort(reason)
            raise CollectiveError(f"{name} failed: {reason}") from exc
        # A little longer than the hub waits: when another rank is late, the hub's diagnosis (which
        # rank) should reach us before we give up on the hub itself.
        wait = self._timeout + min(max(1.0, 0.1 * self._timeout), 30.0)
        deadline = time.monotonic() + wait
        try:
            self._sock.settimeout(wait)
            _send_frame(self._sock, frame)
        except OSError:
            pass  # the hub is gone: reading below reports why (an error frame or EOF)
        try:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError
                self._sock.settimeout(remaining)
                message = pickle.loads(_recv_frame(self._sock))
                kind = message[0]
                if kind == _RESULT:
                    if message[1] != seq or message[2] != name:
                        raise self._broken(
                            name,
                            f"collective mismatch: rank {self._rank} called {name} (call #{seq}) but "
                            f"rank {self._hub_rank} answered {message[2]} (call #{message[1]})",
                        )
                    return message[3]
                if kind == _ERROR:
                    raise self._broken(name, message[1])
                if kind == _BYE:
                    reason = f"rank {self._hub_rank} closed its DistributedContext"
                    raise self._broken(name, reason + (f" ({message[1]})" if message[1] else ""))
        except TimeoutError:
            raise self._broken(
                name,
                f"timed out after {wait:g}s waiting for rank {self._hub_rank} (call #{seq})",
            ) from None
        except (EOFError, OSError):
            raise self._broken(name, f"rank {self._hub_rank} disconnected") from None

    def abort(self, reason: str) -> None:
        """Tell the hub this member gives up, so every other member fails promptly."""
        if self._failure is None:
            self._failure = reason
        try:
            _send_frame(self._sock, pickle.dumps((_ABORT, reason)))
        except OSError:
            pass

    def close(self, reason: str = "") -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._sock.settimeout(1.0)
            _send_frame(self._sock, pickle.dumps((_BYE, reason)))
        except OSError:
            pass
        self._sock.close()
