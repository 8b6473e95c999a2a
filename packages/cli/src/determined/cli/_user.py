"""``det user`` (alias ``u``): log in and out, and manage users."""

from __future__ import annotations

import argparse
import json
from typing import Any

from determined import client
from determined.cli import _render, _session
from determined.cli._declarative import Arg, Cmd
from determined.cli._errors import CliError


def _store() -> client.TokenStore:
    return client.TokenStore()


def _by_name(args: argparse.Namespace, username: str) -> dict[str, Any]:
    return dict(_session.api(args).users.get_by_name(username)["user"])


def login(args: argparse.Namespace) -> None:
    username = args.username
    if username is None:
        try:
            username = input("Username: ").strip()
        except EOFError:
            username = ""
        if not username:
            raise CliError("no username given")
    password = _session.read_password(f"Password for user '{username}': ")
    url = _session.master_url(args)
    try:
        client.login(url, username, password, store=_store())
    except client.UnauthenticatedError:
        raise CliError(f"invalid credentials for user '{username}': check the password") from None
    except client.ForbiddenError as exc:
        raise CliError(f"cannot log in as '{username}': {exc.message}") from None


def logout(args: argparse.Namespace) -> None:
    url = _session.master_url(args)
    store = _store()
    if args.all:
        try:
            data = json.loads(store.path.read_text())
            entry = data["masters"][url]
            users = sorted(entry.get("tokens") or {})
        except (OSError, ValueError, KeyError, TypeError):
            users = []
        for name in users:
            client.logout(url, name, store=store)
        return
    client.logout(url, args.user, store=store)


def whoami(args: argparse.Namespace) -> None:
    print(f"You are logged in as user '{_session.current_username(args)}'")


def list_users(args: argparse.Namespace) -> None:
    users = _session.api(args).users.list().get("users") or []
    if not args.all:
        users = [u for u in users if u.get("active", True)]
    if args.json:
        _render.print_json(users)
        return
    headers = ["User Id", "Username", "Display Name", "Admin", "Active", "Remote"]
    headers += ["Agent Uid", "Agent Gid", "Agent User", "Agent Group"]
    rows = []
    for u in users:
        group = u.get("agentUserGroup") or {}
        rows.append(
            [
                u.get("id"),
                u.get("username"),
                u.get("displayName") or "N/A",
                u.get("admin"),
                u.get("active"),
                u.get("remote"),
                group.get("agentUid", "N/A"),
                group.get("agentGid", "N/A"),
                group.get("agentUser", "N/A"),
                group.get("agentGroup", "N/A"),
            ]
        )
    _render.print_table(headers, rows)


def _new_password(username: str) -> str:
    password = _session.read_password(f"New password for user '{username}': ")
    confirm = _session.read_password("Confirm password: ")
    if password != confirm:
        raise CliError("Passwords do not match")
    return password


def create(args: argparse.Namespace) -> None:
    password = args.password
    if not args.remote and password is None:
        password = _new_password(args.username)
    user = {
        "username": args.username,
        "admin": bool(args.admin),
        "active": True,
        "remote": bool(args.remote),
    }
    _session.api(args).users.create(user, client.hash_password(password or ""))
    print(f"Created user '{args.username}'")


def change_password(args: argparse.Namespace) -> None:
    username = args.target_user or args.user or _session.current_username(args)
    password = _new_password(username)
    user = _by_name(args, username)
    _session.api(args).users.set_password(user["id"], client.hash_password(password))
    print(f"Changed the password of user '{username}'")
    if args.target_user is None:
        # Sign in again with the new password so the cached token stays usable.
        client.login(_session.master_url(args), username, password, store=_store())


def _set_active(active: bool) -> Any:
    def run(args: argparse.Namespace) -> None:
        user = _by_name(args, args.username)
        _session.api(args).users.patch(user["id"], {"active": active})
        print(f"{'Activated' if active else 'Deactivated'} user '{args.username}'")

    return run


def _bool(text: str) -> bool:
    value = text.strip().lower()
    if value in ("true", "t", "yes", "y", "1", "on"):
        return True
    if value in ("false", "f", "no", "n", "0", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def rename(args: argparse.Namespace) -> None:
    user = _by_name(args, args.target_user)
    _session.api(args).users.patch(user["id"], {"username": args.new_username})
    print(f"Renamed user '{args.target_user}' to '{args.new_username}'")


def edit(args: argparse.Namespace) -> None:
    fields: dict[str, Any] = {}
    names = []
    for attr, field, label in (
        ("display_name", "displayName", "Display Name"),
        ("remote", "remote", "Remote"),
        ("activate", "active", "Active"),
        ("username", "username", "Username"),
        ("admin", "admin", "Admin"),
    ):
        value = getattr(args, attr)
        if value is not None:
            fields[field] = value
            names.append(label)
    if not fields:
        raise CliError("No field provided. Use 'det user edit -h' for usage.")
    user = _by_name(args, args.target_user)
    _session.api(args).users.patch(user["id"], fields)
    print("Changes made to the following fields: " + ", ".join(names))


COMMANDS = [
    Cmd(
        "u|ser",
        None,
        "manage users",
        [
            Cmd(
                "list ls",
                list_users,
                "list users",
                [
                    Arg("-a", "--all", action="store_true", help="list inactive users too"),
                    Arg("--json", action="store_true", help="print as JSON (det)"),
                ],
                default=True,
            ),
            Cmd(
                "login",
                login,
                "log in user (the password is read from the terminal, or one line of stdin)",
                [Arg("username", nargs="?", default=None, help="name of user to log in as")],
            ),
            Cmd(
                "logout",
                logout,
                "log out user",
                [Arg("-a", "--all", action="store_true", help="log out of all cached sessions")],
            ),
            Cmd("whoami", whoami, "print the active user", []),
            Cmd(
                "create",
                create,
                "create user",
                [
                    Arg("username", help="name of new user"),
                    Arg("--admin", action="store_true", help="give new user admin rights"),
                    Arg("--password", help="password of the new user (asked for when left out)"),
                    Arg("--remote", action="store_true", help="a remote (SSO) user"),
                ],
            ),
            Cmd(
                "change-password",
                change_password,
                "change password for user",
                [Arg("target_user", nargs="?", default=None, help="name of user to change")],
            ),
            Cmd(
                "rename",
                rename,
                "change username for user (admins)",
                [
                    Arg("target_user", help="name of user whose username should be changed"),
                    Arg("new_username", help="new username for target_user"),
                ],
            ),
            Cmd(
                "edit",
                edit,
                "edit user fields",
                [
                    Arg("target_user", help="name of user that should be edited"),
                    Arg("--display-name", default=None, help="new display name for target_user"),
                    Arg("--username", default=None, help="new username for target_user"),
                    Arg(
                        "--remote",
                        type=_bool,
                        metavar="(true|false)",
                        default=None,
                        help="set user as remote (admins)",
                    ),
                    Arg(
                        "--active",
                        dest="activate",
                        type=_bool,
                        metavar="(true|false)",
                        default=None,
                        help="set user as active/inactive (admins)",
                    ),
                    Arg(
                        "--admin",
                        type=_bool,
                        metavar="(true|false)",
                        default=None,
                        help="grant/remove admin permissions (admins)",
                    ),
                ],
            ),
            Cmd(
                "activate",
                _set_active(True),
                "activate user",
                [Arg("username", help="name of user to activate")],
            ),
            Cmd(
                "deactivate",
                _set_active(False),
                "deactivate user",
                [Arg("username", help="name of user to deactivate")],
            ),
        ],
    )
]
