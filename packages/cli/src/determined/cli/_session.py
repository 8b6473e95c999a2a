"""Getting an authenticated session for a command, once per invocation.

``det`` resolves the user the way upstream's CLI does (``determined.client.login``): ``-u``, then
``$DET_USER``/``$DET_PASS``, then the master's active cached user, then ``determined`` with an empty
password. When that fails on a terminal, the user is asked for the password; otherwise the command
stops with a hint to run ``det user login``.
"""

from __future__ import annotations

import argparse
import getpass
import os
import sys

from determined import client
from determined.cli._errors import CliError

CLI_RETRIES = 3
CLI_BACKOFF = 0.25


def master_url(args: argparse.Namespace) -> str:
    """The canonical master URL of this invocation (``-m``, ``$DET_MASTER``, localhost:8080)."""
    return client.master_address(getattr(args, "master", None))


def read_password(prompt: str) -> str:
    """A password from the terminal (not echoed), or one line of stdin when it is not a terminal
    (``echo "$PW" | det user login alice``)."""
    if sys.stdin is not None and sys.stdin.isatty():
        return getpass.getpass(prompt)
    line = sys.stdin.readline() if sys.stdin is not None else ""
    if not line:
        raise CliError(f"{prompt.strip().rstrip(':')}: no password given on standard input")
    return line.rstrip("\r\n")


def _tune(session: client.Session) -> client.Session:
    # A person waits on the CLI: fail over faster than the SDK's 5 retries with 0.5 s backoff.
    session.max_retries = CLI_RETRIES
    session.backoff = CLI_BACKOFF
    return session


def setup_session(args: argparse.Namespace) -> client.Session:
    """The logged-in session of this invocation (created on first use and reused)."""
    cached = getattr(args, "_session", None)
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    url = master_url(args)
    user = getattr(args, "user", None)
    try:
        session = client.login(url, user)
    except client.UnauthenticatedError as exc:
        name = user or os.environ.get("DET_USER") or "determined"
        if sys.stdin is None or not sys.stdin.isatty():
            raise CliError(
                f"cannot log in to {url} as '{name}' ({exc.message}): "
                f"log in with `det user login {name}`"
            ) from None
        password = getpass.getpass(f"Password for user '{name}': ")
        try:
            session = client.login(url, name, password)
        except client.UnauthenticatedError:
            raise CliError(f"invalid credentials for user '{name}'") from None
    args._session = _tune(session)
    return session


def current_username(args: argparse.Namespace) -> str:
    """The name of the user this invocation acts as."""
    cached = getattr(args, "_username", None)
    if cached is not None:
        return str(cached)
    me = api(args).users.me()
    name = str((me.get("user") or {}).get("username") or "")
    args._username = name
    return name


def api(args: argparse.Namespace) -> client.Client:
    """The typed REST client over this invocation's logged-in session: every command calls the
    master through it."""
    return client.Client(setup_session(args))


def unauth_api(args: argparse.Namespace) -> client.Client:
    """A client without a token, for the routes that need none (the master's info)."""
    return client.Client(_tune(client.Session(master_url(args))))
