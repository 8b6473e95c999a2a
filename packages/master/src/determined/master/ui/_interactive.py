"""Upstream's interactive-task page URL, ``/det/interactive/<task id>/...``: where upstream's own
``det tensorboard start`` and ``det notebook start`` send the browser. det's UI has no page of its
own there; the task is served through the proxy, so the URL redirects to ``/proxy/<task id>/``."""

from __future__ import annotations

import urllib.parse

from fastapi import APIRouter, Request
from starlette.responses import RedirectResponse, Response

from determined.master.ui import _session

router = APIRouter(include_in_schema=False)


@router.get("/det/interactive/{task_id}/{rest:path}")
def interactive(request: Request, task_id: str, rest: str) -> Response:
    """Sign in first (the proxy needs the session cookie), then the task's proxied root."""
    try:
        _session.page_principal(request)
    except _session.LoginRequired as exc:
        return _session.login_redirect(exc)
    return RedirectResponse(f"/proxy/{urllib.parse.quote(task_id, safe='')}/", status_code=303)
