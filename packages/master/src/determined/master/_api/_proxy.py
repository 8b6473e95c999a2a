"""The authenticated reverse proxy: ``/proxy/{task_id}/...`` to a task's own HTTP server.

A proxied task (TensorBoard, notebook, a command that serves HTTP) listens on the port its
allocation was given (``DET_TASK_PORT``) and serves under ``/proxy/<task_id>/``; the master forwards
the full path unchanged, streaming both ways, and WebSocket connections too (JupyterLab's kernels).
Callers authenticate like the API: a bearer token (the CLI) or the web UI's ``auth`` cookie; only
the task's owner or an admin gets through. Every request and WebSocket message counts as activity
for the task's idle timeout. Before the task's port answers, requests get a 503 saying so.

``/proxy/<task id>:<port>/`` is a running trial's ``environment.proxy_ports`` entry
(``_proxy_ports.py``): HTTP and WebSocket the same way, a ``proxy_tcp`` port as a TCP tunnel.
"""

from __future__ import annotations

from typing import Any

import httpx
from fastapi import Request, WebSocket
from fastapi.responses import RedirectResponse, Response, StreamingResponse
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool

from determined.master._api._deps import Principal, authenticate_sync, tasks_of
from determined.master._api._json_route import api_router
from determined.master._api._proxy_ports import port_service, relay, tunnel_tcp
from determined.master._wire import APIError

router = api_router(include_in_schema=False)

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
        "host",
    }
)
"""Headers that describe one connection, never forwarded."""

METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]


def _principal(conn: Any) -> Principal:
    """The caller of an HTTP request or WebSocket (the API's token rules)."""
    return authenticate_sync(conn)


def target_of(conn: Any, task_id: str, principal: Principal) -> tuple[str, int]:
    """The address and port to forward to; 403/404/503 with a message otherwise."""
    tasks = tasks_of(conn)
    view = tasks.get(task_id)
    if view is None:
        raise APIError(404, f"task {task_id} not found")
    user = principal.user
    if not user.admin and user.id != view.owner_id:
        raise APIError(403, f"only the owner of task {task_id} or an admin may open it")
    if not view.proxied:
        raise APIError(404, f"task {task_id} serves nothing through the proxy")
    if view.done:
        raise APIError(404, f"task {task_id} has ended ({view.exit_status or 'terminated'})")
    live = tasks.live_task(task_id)
    if live is None or not live.ready or live.port is None:
        state = view.state if live is None or live.running else "STARTING"
        raise APIError(503, f"task {task_id} is not ready yet (state {state}); retry shortly")
    return live.address or "127.0.0.1", live.port


def _forward_headers(headers: Any, credentials: bool = False) -> list[tuple[str, str]]:
    """Request headers for the task: no hop-by-hop ones, no master credentials (unless
    ``credentials``: an unauthenticated proxy port may check its own)."""
    out = []
    for name, value in headers.items():
        lower = name.lower()
        if lower in HOP_BY_HOP or lower == "content-length":
            continue
        if lower == "authorization" and not credentials:
            continue
        if lower == "cookie" and not credentials:
            kept = [c for c in value.split(";") if c.strip() and not c.strip().startswith("auth=")]
            if not kept:
                continue
            value = ";".join(kept).strip()
        out.append((name, value))
    return out


def _client(request: Request) -> httpx.AsyncClient:
    state = request.app.state
    client = getattr(state, "proxy_client", None)
    if client is None:
        client = httpx.AsyncClient(
            timeout=httpx.Timeout(None, connect=10.0), follow_redirects=False
        )
        state.proxy_client = client
    return client


@router.api_route("/proxy/{task_id}", methods=METHODS)
async def proxy_root(request: Request, task_id: str) -> Response:
    """``/proxy/<id>`` → ``/proxy/<id>/`` (the task serves under the trailing slash)."""
    query = f"?{request.url.query}" if request.url.query else ""
    return RedirectResponse(f"/proxy/{task_id}/{query}", status_code=307)


@router.api_route("/proxy/{task_id}/{path:path}", methods=METHODS)
async def proxy_http(request: Request, task_id: str, path: str) -> Response:
    """Forward one HTTP request to the task and stream its answer back."""
    service = await run_in_threadpool(port_service, request, task_id)
    if service is not None:
        if service.tcp:
            raise APIError(
                400,
                f"service {task_id} is a TCP port (proxy_tcp): open it with"
                f" 'python -m determined.cli.tunnel MASTER {task_id}'",
            )
        address, port, credentials = service.address, service.port, service.unauthenticated
    else:
        principal = await run_in_threadpool(_principal, request)
        address, port = await run_in_threadpool(target_of, request, task_id, principal)
        credentials = False
    tasks = tasks_of(request)
    tasks.touch(task_id)
    host = f"[{address}]" if ":" in address else address
    url = f"http://{host}:{port}{request.url.path}"
    if request.url.query:
        url += f"?{request.url.query}"
    body = await request.body()
    client = _client(request)
    upstream = client.build_request(
        request.method, url, headers=_forward_headers(request.headers, credentials), content=body
    )
    try:
        answer = await client.send(upstream, stream=True)
    except httpx.HTTPError as e:
        raise APIError(502, f"task {task_id} did not answer: {e}") from None
    headers = [(k, v) for k, v in answer.headers.multi_items() if k.lower() not in HOP_BY_HOP]

    async def body_chunks() -> Any:
        try:
            async for chunk in answer.aiter_raw():
                yield chunk
        finally:
            tasks.touch(task_id)

    response = StreamingResponse(
        body_chunks(), status_code=answer.status_code, background=BackgroundTask(answer.aclose)
    )
    response.raw_headers = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers]
    return response


@router.websocket("/proxy/{task_id}/{path:path}")
async def proxy_websocket(websocket: WebSocket, task_id: str, path: str) -> None:
    """Relay a WebSocket between the caller and the task, message by message."""
    from websockets.asyncio.client import connect

    try:
        service = await run_in_threadpool(port_service, websocket, task_id)
        if service is None:
            principal = await run_in_threadpool(_principal, websocket)
            address, port = await run_in_threadpool(target_of, websocket, task_id, principal)
        else:
            address, port = service.address, service.port
    except APIError as e:
        await websocket.close(code=4000 + e.status, reason=e.message[:120])
        return
    if service is not None and service.tcp:
        await tunnel_tcp(websocket, service)
        return
    credentials = service is not None and service.unauthenticated
    tasks = tasks_of(websocket)  # type: ignore[arg-type]
    host = f"[{address}]" if ":" in address else address
    url = f"ws://{host}:{port}{websocket.url.path}"
    if websocket.url.query:
        url += f"?{websocket.url.query}"
    skip = HOP_BY_HOP | {"sec-websocket-key", "sec-websocket-version", "sec-websocket-extensions"}
    skip = skip | {"sec-websocket-protocol", "origin"}
    headers = [
        (k, v) for k, v in _forward_headers(websocket.headers, credentials) if k.lower() not in skip
    ]
    protocols = [
        p.strip()
        for p in websocket.headers.get("sec-websocket-protocol", "").split(",")
        if p.strip()
    ]
    try:
        backend = await connect(
            url,
            additional_headers=headers,
            subprotocols=protocols or None,  # type: ignore[arg-type]
            origin=None,
            max_size=None,
            open_timeout=10,
        )
    except Exception as e:
        await websocket.close(code=1011, reason=f"task did not accept: {e}"[:120])
        return
    await websocket.accept(subprotocol=backend.subprotocol)
    tasks.touch(task_id)

    async def to_task() -> None:
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                return
            tasks.touch(task_id)
            if message.get("bytes") is not None:
                await backend.send(message["bytes"])
            elif message.get("text") is not None:
                await backend.send(message["text"])

    async def to_caller() -> None:
        async for data in backend:
            tasks.touch(task_id)
            if isinstance(data, bytes):
                await websocket.send_bytes(data)
            else:
                await websocket.send_text(data)

    await relay(websocket, [to_task(), to_caller()], backend.close)
