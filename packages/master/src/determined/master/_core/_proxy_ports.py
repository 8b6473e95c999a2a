"""Experiment proxy ports: what a running trial serves through the master's ``/proxy/``.

An experiment's ``environment.proxy_ports`` lists ports its trials listen on (upstream's
"Exposing Custom Ports"). While a trial's allocation runs, each port is a proxy *service* with the
id ``<task id>:<port>`` (or the bare task id for an entry with ``default_service_id: true``),
forwarded to the chief's address: plain HTTP (and WebSocket) by default, a raw TCP stream carried
in WebSocket binary messages with ``proxy_tcp: true`` (what ``python -m determined.cli.tunnel``
and ``det e create -p`` speak). ``unauthenticated: true`` opens the service to callers without a
login. Services appear when the allocation is launched and disappear when it exits. An allocation
whose port another running allocation on the same machine holds is launched once that one ends.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any


@dataclasses.dataclass(frozen=True)
class ProxyService:
    """One proxied port of a running allocation.

    Attributes:
        service_id: what follows ``/proxy/`` (``<task id>:<port>``, or the task id).
        task_id: the trial's task.
        allocation_id: the allocation serving it (the service ends with it).
        address: the chief's address (``127.0.0.1`` for the local resource manager).
        port: the port the trial listens on.
        tcp: forward a TCP stream over a WebSocket instead of HTTP.
        unauthenticated: callers need no login.
    """

    service_id: str
    task_id: str
    allocation_id: str
    address: str
    port: int
    tcp: bool = False
    unauthenticated: bool = False


def services_of(
    config: dict[str, Any], task_id: str, allocation_id: str, address: str
) -> list[ProxyService]:
    """The services an allocation of an experiment with ``config`` offers (none without
    ``environment.proxy_ports``). The config is already validated and defaulted."""
    environment = config.get("environment")
    entries = (environment.get("proxy_ports") if isinstance(environment, dict) else None) or []
    out = []
    for entry in entries:
        if not isinstance(entry, dict) or entry.get("proxy_port") is None:
            continue
        port = int(entry["proxy_port"])
        out.append(
            ProxyService(
                service_id=task_id if entry.get("default_service_id") else f"{task_id}:{port}",
                task_id=task_id,
                allocation_id=allocation_id,
                address=address,
                port=port,
                tcp=bool(entry.get("proxy_tcp")),
                unauthenticated=bool(entry.get("unauthenticated")),
            )
        )
    return out


class ProxyPorts:
    """The proxy services of running allocations, by service id (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._services: dict[str, ProxyService] = {}

    def register(self, services: list[ProxyService]) -> None:
        """Offer ``services`` (a later allocation of the same task replaces an earlier one's)."""
        with self._lock:
            for service in services:
                self._services[service.service_id] = service

    def unregister(self, allocation_id: str) -> None:
        """Withdraw every service of ``allocation_id`` (it exited, or never ran)."""
        with self._lock:
            ended = [k for k, s in self._services.items() if s.allocation_id == allocation_id]
            for service_id in ended:
                del self._services[service_id]

    def held_by_others(self, services: list[ProxyService]) -> list[ProxyService]:
        """The running services of other allocations on the same address and port as one of
        ``services``: a second process cannot listen there (no container gives each trial a
        network of its own), so the allocation waits for them to end."""
        wanted = {(s.address, s.port) for s in services}
        mine = {s.allocation_id for s in services}
        with self._lock:
            return [
                s
                for s in self._services.values()
                if (s.address, s.port) in wanted and s.allocation_id not in mine
            ]

    def get(self, service_id: str) -> ProxyService | None:
        """The running service ``service_id``, or None."""
        with self._lock:
            return self._services.get(service_id)

    def of_task(self, task_id: str) -> list[ProxyService]:
        """The services a task offers now."""
        with self._lock:
            return [s for s in self._services.values() if s.task_id == task_id]
