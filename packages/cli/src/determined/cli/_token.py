"""``det token`` (alias ``tkn``): create, list, describe, edit, revoke access tokens and log in
with one, as upstream 0.38's CLI does."""

from __future__ import annotations

import argparse
from typing import Any

from determined import client
from determined.cli import _render, _session
from determined.cli._declarative import Arg, Cmd, Group
from determined.cli._errors import CliError

HEADERS = ["ID", "User ID", "Description", "Created At", "Expires At", "Revoked", "Token Type"]

_FORMAT = Group(
    Arg("--json", action="store_true", help="print as JSON"),
    Arg("--yaml", action="store_true", help="print as YAML"),
)


def _print(args: argparse.Namespace, data: Any, text: str | None = None) -> None:
    if getattr(args, "json", False):
        _render.print_json(data)
    elif getattr(args, "yaml", False):
        print(_render.dump_yaml(data), end="")
    elif text is not None:
        print(text)


def _print_infos(args: argparse.Namespace, infos: list[dict[str, Any]]) -> None:
    if args.json or args.yaml:
        _print(args, infos)
        return
    rows = [
        [
            t.get("id"),
            t.get("userId"),
            t.get("description") or "",
            _render.format_time(t.get("createdAt")),
            _render.format_time(t.get("expiry")),
            t.get("revoked"),
            t.get("tokenType"),
        ]
        for t in infos
    ]
    _render.print_table(HEADERS, rows)


def create_token(args: argparse.Namespace) -> None:
    api = _session.api(args)
    username = args.username or _session.current_username(args)
    user = api.users.get_by_name(username)["user"]
    lifespan = None
    if args.expiration_days is not None:
        if args.expiration_days == -1:
            lifespan = "-1"
        elif args.expiration_days <= 0:
            raise CliError("--expiration-days: must be a positive number of days, or -1")
        else:
            lifespan = f"{24 * args.expiration_days}h"
    answer = api.tokens.create(int(user["id"]), lifespan, args.description or "")
    _print(args, answer, f"TokenID: {answer['tokenId']}\nAccess-Token: {answer['token']}")


def list_tokens(args: argparse.Namespace) -> None:
    answer = _session.api(args).tokens.list(
        username=args.username, show_inactive=bool(args.show_inactive)
    )
    _print_infos(args, list(answer.get("tokenInfo") or []))


def describe_token(args: argparse.Namespace) -> None:
    answer = _session.api(args).tokens.list(token_ids=args.token_id, show_inactive=True)
    infos = list(answer.get("tokenInfo") or [])
    missing = sorted(set(args.token_id) - {int(t["id"]) for t in infos})
    if missing:
        raise CliError(f"no access token with id {', '.join(map(str, missing))} that you may see")
    _print_infos(args, infos)


def revoke_token(args: argparse.Namespace) -> None:
    try:
        _session.api(args).tokens.revoke(args.token_id)
    except client.NotFoundError:
        raise CliError(f"token {args.token_id} not found") from None
    print(f"Successfully revoked token {args.token_id}.")


def edit_token(args: argparse.Namespace) -> None:
    if args.description is None:
        raise CliError("nothing to change: give --description")
    try:
        answer = _session.api(args).tokens.patch(args.token_id, description=args.description)
    except client.NotFoundError:
        raise CliError(f"token {args.token_id} not found") from None
    _print(args, answer, f"Successfully updated token with ID: {args.token_id}.")


def login_with_token(args: argparse.Namespace) -> None:
    url = _session.master_url(args)
    try:
        me = client.Client(client.Session(url, args.token)).users.me()
    except client.UnauthenticatedError:
        raise CliError("the master refused this token (revoked, expired or unknown)") from None
    username = str(me["user"]["username"])
    client.TokenStore().set(url, username, args.token)
    print(f"Authenticated as {username}.")


COMMANDS = [
    Cmd(
        "token tkn",
        None,
        "manage access tokens",
        [
            Cmd(
                "describe",
                describe_token,
                "describe token info",
                [
                    Arg("token_id", type=int, nargs="+", help="id(s) of the tokens to describe"),
                    _FORMAT,
                ],
            ),
            Cmd(
                "list ls",
                list_tokens,
                "list access tokens you may see (every user's for admins)",
                [
                    Arg("username", nargs="?", default=None, help="only this user's tokens"),
                    Arg(
                        "--show-inactive",
                        action="store_true",
                        help="include revoked and expired tokens",
                    ),
                    _FORMAT,
                ],
            ),
            Cmd(
                "revoke",
                revoke_token,
                "revoke token (it stops working at once)",
                [Arg("token_id", type=int, help="id of the token to revoke")],
            ),
            Cmd(
                "create",
                create_token,
                "create token (yourself, or any user for an admin)",
                [
                    Arg("username", nargs="?", default=None, help="user to create the token for"),
                    Arg(
                        "--expiration-days",
                        "-e",
                        type=int,
                        default=None,
                        help="lifespan in days (-1: the longest the master allows)",
                    ),
                    Arg("--description", "-d", default=None, help="description of the token"),
                    _FORMAT,
                ],
            ),
            Cmd(
                "edit",
                edit_token,
                "edit token info",
                [
                    Arg("token_id", type=int, help="id of the token to edit"),
                    Arg("--description", "-d", default=None, help="new description"),
                    _FORMAT,
                ],
            ),
            Cmd(
                "login",
                login_with_token,
                "log in with token (cached like a password login)",
                [Arg("token", help="the access token (one starting with '-' goes after '--')")],
            ),
        ],
    )
]
