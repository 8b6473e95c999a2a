"""Web UI sign-in: the API's own session tokens, carried in an HttpOnly cookie.

The login form posts to ``/login``; the master checks the password and creates a session exactly
as ``POST /api/v1/auth/login`` does, and the token goes into the ``auth`` cookie (HttpOnly,
SameSite=Lax), which the API's authentication already accepts beside ``Authorization: Bearer``.
SameSite=Lax keeps other sites from riding the cookie on POSTs (no CSRF through the API's actions).
"""

from __future__ import annotations

import urllib.parse
from typing import Any

from fastapi import Request
from starlette.responses import RedirectResponse, Response

from determined.master import _auth
from determined.master._api import _users
from determined.master._api._deps import Principal, authenticate_sync
from determined.master._wire import APIError

COOKIE = "auth"


class LoginRequired(Exception):
    """A page was requested without a valid session: the handler redirects to the login page."""

    def __init__(self, next_url: str) -> None:
        super().__init__(next_url)
        self.next_url = next_url


def safe_next(value: str | None) -> str:
    """A local path to go to after login; anything else (other hosts, schemes) becomes ``/``."""
    if not value or not value.startswith("/") or value.startswith("//") or "\\" in value:
        return "/"
    parsed = urllib.parse.urlsplit(value)
    if parsed.scheme or parsed.netloc:
        return "/"
    return value


def page_principal(request: Request) -> Principal:
    """The signed-in user of a page request; :class:`LoginRequired` when there is none."""
    try:
        return authenticate_sync(request)
    except APIError as e:
        if e.status == 401:
            target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
            raise LoginRequired(target) from None
        raise


def login_redirect(exc: LoginRequired) -> RedirectResponse:
    query = urllib.parse.urlencode({"next": safe_next(exc.next_url)})
    response = RedirectResponse(f"/login?{query}", status_code=303)
    response.delete_cookie(COOKIE, path="/")
    return response


def sign_in(request: Request, username: str, password: str) -> tuple[str, dict[str, Any]]:
    """Check the password like the API's login and open a session: (token, user)."""
    result = _users.login(request, {"username": username, "password": password})
    return str(result["token"]), dict(result["user"])


def set_session_cookie(request: Request, response: Response, token: str) -> None:
    response.set_cookie(
        COOKIE,
        token,
        max_age=_auth.SESSION_DAYS * 24 * 3600,
        path="/",
        httponly=True,
        samesite="lax",
        secure=request.url.scheme == "https",
    )


def sign_out(request: Request, response: Response) -> None:
    """Revoke the session of the request's cookie (if still valid) and drop the cookie."""
    try:
        principal = authenticate_sync(request)
    except APIError:
        principal = None
    if principal is not None and principal.session_id is not None:
        _users.logout(request, principal)
    response.delete_cookie(COOKIE, path="/")
