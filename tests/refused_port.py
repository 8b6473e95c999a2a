"""A loopback port that refuses connections, for tests of an absent master."""

from __future__ import annotations

import socket


def refusing_socket() -> socket.socket:
    """A socket bound to a free loopback port but not listening: connections to the port are
    refused, and no other process can bind it while the socket is open. (A port picked and closed
    at once can go to another test's master a moment later: then "the master is down" was
    answered by that master.) Close it, or ``listen()`` on it to serve the port."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    return sock
