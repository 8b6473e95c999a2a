"""det's web UI, served by det-master at ``/``: server-rendered pages, small hand-written scripts.

No build step and nothing fetched at run time: Jinja2 templates under ``templates/``, ES modules
and CSS under ``static/`` (served at ``/ui/static``), JSON for charts and logs under ``/ui/api``,
and HTML fragments for live refreshes under ``/ui/partials``. Sign-in uses the API's own session
tokens in an HttpOnly cookie; ``/api/v1/...`` keeps accepting ``Authorization: Bearer``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fastapi import FastAPI

__all__ = ["install"]


def install(app: FastAPI) -> None:
    """Add the UI's routes and static files to the master's application (after the API's)."""
    from starlette.staticfiles import StaticFiles
    from starlette.types import Receive, Scope, Send

    from determined.master.ui import _api, _interactive, _pages, _team_pages
    from determined.master.ui._render import STATIC_DIR, STATIC_PREFIX

    class _Static(StaticFiles):
        """Static files that browsers revalidate (cheap 304s): never a stale script after an
        upgrade, whatever URL a module imported it by."""

        async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
            async def send_with_header(message: dict[str, object]) -> None:
                if message["type"] == "http.response.start":
                    headers = list(message.get("headers") or [])  # type: ignore[call-overload]
                    headers.append((b"cache-control", b"no-cache"))
                    message["headers"] = headers
                await send(message)

            await super().__call__(scope, receive, send_with_header)  # type: ignore[arg-type]

    app.include_router(_api.router)
    app.include_router(_pages.router)
    app.include_router(_team_pages.router)
    app.include_router(_interactive.router)
    app.mount(STATIC_PREFIX, _Static(directory=str(STATIC_DIR)), name="ui-static")
