"""``det master cluster-message set|clear|get``: the notice admins show every user.

Users see the active message in the web UI and in ``det master info``; ``get`` shows admins the
current one, also when it starts later.
"""

from __future__ import annotations

import argparse
import datetime
import sys

from determined.cli import _render, _session
from determined.cli._declarative import Arg, Cmd, Group
from determined.cli._errors import CliError


def _rfc3339(value: str | None, name: str) -> str | None:
    if value is None:
        return None
    if _render.parse_time(value) is None or "T" not in value:
        raise CliError(f"{name} time must be RFC-3339, i.e. of the form YYYY-MM-DDThh:mm:ssZ")
    return value


def set_message(args: argparse.Namespace) -> None:
    if not args.message:
        raise CliError("Provide a message using the -m flag.")
    start = args.start or datetime.datetime.now(datetime.timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )
    _session.api(args).master.set_cluster_message(
        args.message,
        start_time=_rfc3339(start, "Start"),
        end_time=_rfc3339(args.end, "End"),
        duration=args.duration,
    )


def clear_message(args: argparse.Namespace) -> None:
    _session.api(args).master.clear_cluster_message()


def get_message(args: argparse.Namespace) -> None:
    answer = _session.api(args).master.cluster_message()
    if args.json:
        _render.print_json(answer)
    else:
        sys.stdout.write(_render.dump_yaml(answer))


def _format_group() -> Group:
    return Group(
        Arg("--json", action="store_true", help="print as JSON"),
        Arg("--yaml", action="store_true", help="print as YAML"),
    )


CLUSTER_MESSAGE = Cmd(
    "cluster-message",
    None,
    "set or clear cluster-wide message",
    [
        Cmd(
            "set",
            set_message,
            "create or edit the displayed cluster-wide message",
            [
                Arg(
                    "-s",
                    "--start",
                    default=None,
                    help="time to start displaying the message (RFC 3339, e.g. "
                    "'2021-10-26T23:17:12Z'); default is now",
                ),
                Group(
                    Arg(
                        "-e",
                        "--end",
                        default=None,
                        help="time to stop displaying the message (RFC 3339); default is never",
                    ),
                    Arg(
                        "-d",
                        "--duration",
                        default=None,
                        help="how long the message lasts, e.g. 90m, 24h, 5d or 2w "
                        "(instead of --end)",
                    ),
                ),
                Arg("-m", "--message", default=None, help="text of the message to display"),
            ],
        ),
        Cmd(
            "clear",
            clear_message,
            "clear cluster-wide message",
            [
                Arg(
                    "-c",
                    "--clear",
                    action="store_true",
                    default=False,
                    help="clear the cluster-wide message (the default)",
                )
            ],
        ),
        Cmd("get", get_message, "get cluster-wide message", [_format_group()]),
    ],
)
"""The ``cluster-message`` group of ``det master``."""
