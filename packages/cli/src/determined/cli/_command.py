"""``det command`` (``det cmd``): run a command line on the cluster's resources, list, describe, show
the config of, follow the logs of and kill commands, with upstream's names and flags.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
from typing import Any

from determined import client
from determined.cli import _render, _session
from determined.cli._config_file import CONFIG_HELP, apply_overrides, parse_config, read_config_text
from determined.cli._declarative import Arg, Cmd
from determined.cli._errors import CliError
from determined.cli._task import (
    NTSC_HEADERS,
    TASK_LOG_ARGS,
    expand_ids,
    follow_task_logs,
    list_ntsc,
    ntsc_row,
    show_task_logs,
)

CONTEXT_HELP = (
    "a directory whose contents are copied into the command's working directory (not the"
    " directory itself); at most 95 MB, .detignore leaves files out"
)
INCLUDE_HELP = "a file or directory to copy into the working directory under its own name"


def command_config(args: argparse.Namespace) -> dict[str, Any]:
    """The command config of ``--config-file``, ``--config`` overrides and the entrypoint."""
    config: dict[str, Any] = {}
    if args.config_file:
        config = parse_config(read_config_text(args.config_file), args.config_file)
    config = apply_overrides(config, args.config)
    for volume in args.volume or []:
        host, sep, container = volume.partition(":")
        if not sep or not host or not container:
            raise CliError(f"--volume {volume!r}: expected <host path>:<container path>")
        mounts = config.setdefault("bind_mounts", [])
        mounts.append({"host_path": host, "container_path": container})
    entrypoint = [a for a in (args.entrypoint or []) if a != "--"]
    if entrypoint:
        config["entrypoint"] = entrypoint
    if not config.get("entrypoint"):
        raise CliError("an entrypoint is required: det cmd run COMMAND [ARGS...]")
    return config


def run_command(args: argparse.Namespace) -> None:
    config = command_config(args)
    try:
        files = client.read_context_dir(args.context, list(args.include or []))
    except client.ContextTooLargeError as e:
        raise CliError(str(e)) from None
    except ValueError as e:
        raise CliError(str(e)) from None
    session = _session.setup_session(args)
    answer = client.CommandsClient(session).launch(config, files)
    command = answer.get("command") or {}
    command_id = str(command.get("id"))
    if args.detach:
        print(command_id)
        return
    print(
        _render.colored(f"Launched command (id: {command_id}).", "green", sys.stderr),
        file=sys.stderr,
    )
    follow_task_logs(session, command_id)


def _ids(args: argparse.Namespace, prefixes: list[str]) -> list[str]:
    api = _session.api(args)
    return expand_ids(prefixes, lambda: [str(c["id"]) for c in api.commands.list()["commands"]])


def list_commands(args: argparse.Namespace) -> None:
    users = None if args.all else [_session.current_username(args)]
    items = _session.api(args).commands.list(users)["commands"]
    list_ntsc(args, items)


def describe_command(args: argparse.Namespace) -> None:
    (command_id,) = _ids(args, [args.command_id])
    item = _session.api(args).commands.get(command_id)["command"]
    if args.json:
        _render.print_json(item)
        return
    _render.print_table(NTSC_HEADERS, [ntsc_row(item)], args.csv)


def show_config(args: argparse.Namespace) -> None:
    (command_id,) = _ids(args, [args.command_id])
    config = _session.api(args).commands.get(command_id).get("config") or {}
    print(_render.dump_yaml(config), end="")


def command_logs(args: argparse.Namespace) -> None:
    (task_id,) = _ids(args, [args.task_id])
    show_task_logs(_session.setup_session(args), task_id, args)


def kill_commands(args: argparse.Namespace) -> None:
    ids = _ids(args, list(args.command_id))
    api = _session.api(args)
    for index, command_id in enumerate(ids):
        try:
            api.commands.kill(command_id)
            print(_render.colored(f"Killed command {command_id}", "green"))
        except client.APIError as e:
            if not args.force:
                for ignored in ids[index + 1 :]:
                    print(f"Cowardly not killing {ignored}")
                raise
            print(_render.colored(f"Skipping: {e} ({type(e).__name__})", "red"))


def set_priority(args: argparse.Namespace) -> None:
    (command_id,) = _ids(args, [args.command_id])
    _session.api(args).commands.set_priority(command_id, args.priority)
    print(_render.colored(f"Set priority of command {command_id} to {args.priority}", "green"))


_OUTPUT = [
    Arg("--json", action="store_true", help="print as JSON"),
    Arg("--csv", action="store_true", help="print as CSV"),
]

COMMANDS: list[Any] = [
    Cmd(
        "command cmd",
        None,
        "manage commands",
        [
            Cmd(
                "list ls",
                list_commands,
                "list commands",
                [
                    Arg(
                        "--sort-by",
                        choices=["id", "username", "description", "state", "startTime"],
                        default="startTime",
                        help="sort by the given field",
                    ),
                    Arg("--order-by", choices=["asc", "desc"], default="asc", help="sort order"),
                    Arg("-q", "--quiet", action="store_true", help="only display the IDs"),
                    Arg(
                        "--all",
                        "-a",
                        action="store_true",
                        help="show all commands (including other users')",
                    ),
                    *_OUTPUT,
                ],
                default=True,
            ),
            Cmd(
                "describe",
                describe_command,
                "display command metadata",
                [Arg("command_id", help="command ID"), *_OUTPUT],
            ),
            Cmd(
                "config",
                show_config,
                "display command config",
                [Arg("command_id", help="command ID")],
            ),
            Cmd(
                "run",
                run_command,
                "create command",
                [
                    Arg(
                        "entrypoint",
                        nargs=argparse.REMAINDER,
                        help="entrypoint command and arguments to execute",
                    ),
                    Arg("--config-file", default=None, help="command config file (.yaml)"),
                    Arg("-v", "--volume", action="append", default=[], help="host:container"),
                    Arg("-c", "--context", default=None, type=pathlib.Path, help=CONTEXT_HELP),
                    Arg(
                        "-i",
                        "--include",
                        default=[],
                        action="append",
                        type=pathlib.Path,
                        help=INCLUDE_HELP,
                    ),
                    Arg("--config", action="append", default=[], help=CONFIG_HELP),
                    Arg(
                        "-d",
                        "--detach",
                        action="store_true",
                        help="run in the background and print the ID",
                    ),
                ],
            ),
            Cmd(
                "logs",
                command_logs,
                "fetch command logs",
                [Arg("task_id", help="command ID", metavar="command_id"), *TASK_LOG_ARGS],
            ),
            Cmd(
                "set",
                None,
                "set command attributes",
                [
                    Cmd(
                        "priority",
                        set_priority,
                        "set command priority",
                        [
                            Arg("command_id", help="command ID"),
                            Arg("priority", type=int, help="priority"),
                        ],
                    )
                ],
            ),
            Cmd(
                "kill",
                kill_commands,
                "forcibly terminate a command",
                [
                    Arg("command_id", help="command ID", nargs="+"),
                    Arg("-f", "--force", action="store_true", help="ignore errors"),
                ],
            ),
        ],
    )
]
