"""The request-body guard: no request body beyond ``limits.max_request_body_bytes`` is read.

A body that announces its size (``Content-Length``) is refused with 413 before a byte is read; a
chunked body is counted as it arrives and refused (413, through the app's ``APIError`` handler)
as soon as it passes the limit, so a hostile client cannot make the master hold gigabytes.
"""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from determined.master._wire import APIError, error_body


def too_large_message(limit: int, size: int | None = None) -> str:
    """The 413 message: how big, the limit, and the master-config key that raises it."""
    got = f"{size} bytes" if size is not None else "more than that"
    return (
        f"request body too large: {got}, the master accepts at most {limit} bytes"
        " (an admin raises limits.max_request_body_bytes in the master config)"
    )


class BodyLimit:
    """ASGI middleware refusing HTTP request bodies over ``limit`` bytes (0: no limit)."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.limit <= 0:
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.limit:
            message = too_large_message(self.limit, declared)
            response = JSONResponse(error_body(413, message), status_code=413)
            await response(scope, receive, send)
            return
        seen = 0
        limit = self.limit

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise APIError(413, too_large_message(limit))
            return message

        await self.app(scope, counted, send)


def _content_length(scope: Scope) -> int | None:
    headers: Any = scope.get("headers") or ()
    for name, value in headers:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None
