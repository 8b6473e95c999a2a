"""``det master``: the master's description, configuration (admins), logs and cluster-wide
message."""

from __future__ import annotations

import argparse
import sys

from determined.cli import _render, _session
from determined.cli._cluster_message import CLUSTER_MESSAGE
from determined.cli._declarative import Arg, Cmd, Group


def info(args: argparse.Namespace) -> None:
    answer = _session.unauth_api(args).master.info()
    if args.json:
        _render.print_json(answer)
    else:
        sys.stdout.write(_render.dump_yaml(answer))


def show_config(args: argparse.Namespace) -> None:
    config = _session.api(args).master.config().get("config") or {}
    if args.json:
        _render.print_json(config)
    else:
        sys.stdout.write(_render.dump_yaml(config))


LOG_LEVELS = ["TRACE", "DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]


def set_config(args: argparse.Namespace) -> None:
    level = getattr(args, "log_level", None)
    color = getattr(args, "log_color", None)
    if level is None and color is None:
        from determined.cli._errors import CliError

        raise CliError(
            "Please provide at least one argument to set master config. "
            "Currently, the supported fields are --log.level and --log.color."
        )
    _session.api(args).master.patch_config(
        log_level=f"LOG_LEVEL_{level}" if level else None,
        log_color=None if color is None else color == "on",
    )
    warning = (
        "This will only make ephemeral changes to the master config, "
        "that will be lost if the user restarts the cluster."
    )
    print(_render.colored(warning, "yellow", sys.stderr), file=sys.stderr)
    print("Successfully made changes to the master config.")


def logs(args: argparse.Namespace) -> None:
    if args.tail is not None and args.tail < 0:
        from determined.cli._errors import CliError

        raise CliError(f"--tail: must be >= 0, got {args.tail}")
    params = {"follow": "true" if args.follow else None}
    if args.tail:
        params["offset"] = str(-args.tail)
    for item in _session.api(args).master.logs(params):
        entry = item.get("logEntry") or {}
        print(f"{entry.get('timestamp')} [{entry.get('level') or ''}]: {entry.get('message')}")
        sys.stdout.flush()


COMMANDS = [
    Cmd(
        "master",
        None,
        "manage master",
        [
            Cmd(
                "info",
                info,
                "fetch master info",
                [Arg("--json", action="store_true", help="print as JSON")],
            ),
            Cmd(
                "config",
                None,
                "manage master config",
                [
                    Cmd(
                        "show",
                        show_config,
                        "show master config",
                        [
                            Group(
                                Arg("--json", action="store_true", help="print as JSON"),
                                Arg("--yaml", action="store_true", help="print as YAML"),
                            )
                        ],
                        default=True,
                    ),
                    Cmd(
                        "set",
                        set_config,
                        "set master config",
                        [
                            Arg(
                                "--log.level",
                                dest="log_level",
                                default=None,
                                choices=LOG_LEVELS,
                                help="set the master's log level",
                            ),
                            Arg(
                                "--log.color",
                                dest="log_color",
                                default=None,
                                choices=["on", "off"],
                                help="set the master's log colour",
                            ),
                        ],
                    ),
                    Group(
                        Arg("--json", action="store_true", help="print as JSON"),
                        Arg("--yaml", action="store_true", help="print as YAML"),
                    ),
                ],
            ),
            Cmd(
                "logs",
                logs,
                "fetch master logs",
                [
                    Arg("-f", "--follow", action="store_true", help="keep streaming new records"),
                    Arg("--tail", type=int, help="number of records to show from the end"),
                ],
            ),
            CLUSTER_MESSAGE,
        ],
    )
]
