"""The proxy side of experiment proxy ports (``environment.proxy_ports``).

``/proxy/<task id>:<port>/...`` reaches port ``<port>`` of a running trial whose experiment lists
it (``determined.master._core._proxy_ports``). Callers log in like the API (bearer token or the web
UI's cookie) and need view access to the experiment, unless the port says
``unauthenticated: true``. An HTTP port is forwarded like a task's own server (routes in
``_proxy.py``); a ``proxy_tcp`` port is a TCP stream carried in WebSocket binary messages, the
protocol of upstream's ``python -m determined.cli.tunnel`` and ``det e create -p``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from fastapi import WebSocket

from determined.master._api._access import require_task
from determined.master._api._deps import authenticate_sync, master_of
from determined.master._core._authz import Permission
from determined.master._core._proxy_ports import ProxyService
from determined.master._wire import APIError

logger = logging.getLogger("determined.master")

_CHUNK = 65536


def port_service(conn: Any, service_id: str) -> ProxyService | None:
    """The proxy-port service ``service_id`` if the caller may use it; None when the id is no
    proxy port (a command's, notebook's or TensorBoard's own id); 404 for a ``<task>:<port>`` that
    is not served now, 401/404 for a caller who may not use it."""
    service = master_of(conn).manager.events.proxy_ports.get(service_id)
    if service is None:
        if ":" in service_id:
            task_id, _, port = service_id.rpartition(":")
            raise APIError(
                404,
                f"service {service_id} not found: no running trial of task {task_id} serves"
                f" proxy port {port} (environment.proxy_ports)",
            )
        return None
    if not service.unauthenticated:
        principal = authenticate_sync(conn)
        require_task(conn, principal, service.task_id, Permission.VIEW_NSC)
    return service


async def tunnel_tcp(websocket: WebSocket, service: ProxyService) -> None:
    """Carry one TCP connection to the service in the WebSocket's binary messages, both ways,
    until either side closes. A port nobody listens on refuses the WebSocket (1011)."""
    try:
        reader, writer = await asyncio.open_connection(service.address, service.port)
    except OSError as e:
        await websocket.close(code=1011, reason=f"cannot reach {service.service_id}: {e}"[:120])
        return
    await websocket.accept()

    async def to_service() -> None:
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                return
            data = message.get("bytes")
            if data is None:
                data = (message.get("text") or "").encode()
            writer.write(data)
            await writer.drain()

    async def to_caller() -> None:
        while True:
            data = await reader.read(_CHUNK)
            if not data:
                return
            await websocket.send_bytes(data)

    async def close_service() -> None:
        writer.close()
        await writer.wait_closed()

    await relay(websocket, [to_service(), to_caller()], close_service)


async def relay(
    websocket: WebSocket,
    pumps: list[Coroutine[Any, Any, None]],
    close_backend: Callable[[], Awaitable[Any]],
) -> None:
    """Run a relay's two directions until either ends (a side closed or failed), then cancel the
    other, close the backend and the caller's WebSocket; errors while closing are swallowed, as
    the far side may be gone already."""
    tasks = [asyncio.ensure_future(pump) for pump in pumps]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task
        with contextlib.suppress(Exception):
            await close_backend()
        with contextlib.suppress(Exception):  # WebSocketDisconnect, ConnectionClosed, ...
            await websocket.close()
